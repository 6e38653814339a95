import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { DirectoryClaimStore } from "@tessera/a2ui";
import { expect } from "vitest";

export const BIN = fileURLToPath(new URL("../../dist/bin.js", import.meta.url));

/** Runs the built `tessera` binary as a user would, in its own process. */
export function tessera(...args: string[]) {
  const run = spawnSync(process.execPath, [BIN, ...args], { encoding: "utf8", timeout: 120_000 });
  return { code: run.status, stdout: run.stdout, stderr: run.stderr };
}

/** As `tessera`, with exactly this environment: no TESSERA_* leaking in from the shell. */
export function tesseraWith(env: Record<string, string>, ...args: string[]) {
  const clean = Object.fromEntries(
    Object.entries(process.env).filter(([key]) => !key.startsWith("TESSERA_")),
  );
  const done = spawnSync(process.execPath, [BIN, ...args], {
    encoding: "utf8",
    timeout: 60_000,
    env: { ...clean, ...env },
  });
  return { code: done.status, stdout: done.stdout, stderr: done.stderr };
}

export function scratch(): string {
  return mkdtempSync(join(tmpdir(), "tessera-cli-"));
}

/** `tessera serve …` in its own process, resolved with its URL once it listens. */
export async function serveProcess(args: readonly string[]) {
  const child = spawn(process.execPath, [BIN, "serve", ...args]);
  let output = "";
  const url = await new Promise<string>((resolve, reject) => {
    // The text announcement is on stderr (stdout holds only JSON): read both.
    const read = (chunk: Buffer) => {
      output += chunk.toString();
      const found = /listening on (http:\S+)/.exec(output)?.[1];
      if (found) resolve(found);
    };
    child.stdout.on("data", read);
    child.stderr.on("data", read);
    child.once("close", (code) => reject(new Error(`serve exited early with ${code}`)));
  });
  return {
    url,
    output: () => output,
    /** SIGTERM, resolved with the exit code. */
    stop: () => {
      const exited = new Promise<number | null>((resolve) => child.once("close", resolve));
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

/** GET `target` exactly as given in the request line (fetch would normalise `//`). */
export function rawGet(base: string, target: string): Promise<{ status: number; body: unknown }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const sent = request({ host: hostname, port, path: target, method: "GET" }, (reply) => {
      const chunks: Buffer[] = [];
      reply.on("data", (chunk: Buffer) => chunks.push(chunk));
      reply.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        resolve({ status: reply.statusCode ?? 0, body: text ? JSON.parse(text) : undefined });
      });
    });
    sent.on("error", reject);
    sent.end();
  });
}

/**
 * Claims in the private claim directory `dir` as a worker that died would leave them: in
 * session `s-1`, `died-here` claimed and never settled (in doubt), `finished` settled.
 */
export async function claimDirWithOneInDoubt(dir: string): Promise<void> {
  const store = await DirectoryClaimStore.open(dir);
  const record = { bodyHash: "h", claimedAt: Date.now() };
  await store.claim({ session: "s-1", functionCallId: "died-here" }, record);
  await store.claim({ session: "s-1", functionCallId: "finished" }, record);
  await store.settle(
    { session: "s-1", functionCallId: "finished" },
    { status: "dispatched", settledAt: Date.now() },
  );
  await store.close();
}

/**
 * Whether a test may run the CLI as the unprivileged `nobody` user: as root, with that user
 * and `runuser` on the machine. Permission tests skip with this as their reason otherwise.
 */
const nobodyId =
  process.getuid?.() === 0 ? spawnSync("id", ["-u", "nobody"], { encoding: "utf8" }) : undefined;
export const CAN_RUN_AS_NOBODY =
  nobodyId?.status === 0 && spawnSync("runuser", ["--help"]).status === 0;
/** `nobody`'s uid, when `CAN_RUN_AS_NOBODY`. */
export const NOBODY_UID = Number(nobodyId?.stdout.trim());

/** The built CLI run as `nobody` (see `CAN_RUN_AS_NOBODY`). */
export function tesseraAsNobody(...args: string[]) {
  const run = spawnSync("runuser", ["-u", "nobody", "--", process.execPath, BIN, ...args], {
    encoding: "utf8",
    timeout: 60_000,
  });
  return { code: run.status, stdout: run.stdout, stderr: run.stderr };
}
