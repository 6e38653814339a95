import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { expect } from "vitest";

export const BIN = fileURLToPath(new URL("../../dist/bin.js", import.meta.url));

/** Runs the built `tessera` binary as a user would, in its own process. */
export function tessera(...args: string[]) {
  const run = spawnSync(process.execPath, [BIN, ...args], { encoding: "utf8", timeout: 120_000 });
  return { code: run.status, stdout: run.stdout, stderr: run.stderr };
}

export function scratch(): string {
  return mkdtempSync(join(tmpdir(), "tessera-cli-"));
}

/** `tessera serve …` in its own process, resolved with its URL once it listens. */
export async function serveProcess(args: readonly string[]) {
  const child = spawn(process.execPath, [BIN, "serve", ...args]);
  let output = "";
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      const found = /listening on (http:\S+)/.exec(output)?.[1];
      if (found) resolve(found);
    });
    child.once("exit", (code) => reject(new Error(`serve exited early with ${code}`)));
  });
  return {
    url,
    output: () => output,
    /** SIGTERM, resolved with the exit code. */
    stop: () => {
      const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      return exited;
    },
  };
}

/** A refusal as the README promises it: exit 2, `tessera: <code>: …`, and no stack. */
export function expectRefusal(run: ReturnType<typeof tessera>, code: string): void {
  expect({ exit: run.code, stderr: run.stderr }).toEqual({
    exit: 2,
    stderr: expect.stringMatching(new RegExp(`^tessera: ${code}: `)),
  });
  expect(run.stderr).not.toMatch(/\n\s+at /);
}
