import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { isTesseraError, openStores } from "@tessera/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadPrincipals } from "../src/principals.js";
import { type ServeProcess, serveProcess } from "./support/processes.js";
import { call, principal } from "./support/service.js";

/**
 * The principals file decides who may call, so, like the webhooks and A2UI files, one that
 * group or others may write (they would add a token of their own) or read is refused: at
 * start, and on SIGHUP, where the set in force stays.
 */
const BIN = fileURLToPath(new URL("../../cli/dist/bin.js", import.meta.url));
const identity = (actor: string) => ({ namespaceId: "team", actor, authority: "host" });
const alice = principal("token-alice-mode", identity("alice"));
const mallory = principal("token-mallory-mode", identity("mallory"));

function principalsFile(dir: string, mode: number, principals: readonly unknown[]): string {
  const path = join(dir, `principals-${mode.toString(8)}.json`);
  writeFileSync(path, JSON.stringify({ principals }), { mode: 0o600 });
  // Set after writing: the umask would take bits from the mode given to writeFileSync.
  chmodSync(path, mode);
  return path;
}

function refusal(run: () => unknown): { code: string; message: string } {
  try {
    run();
  } catch (error) {
    if (isTesseraError(error)) return { code: error.code, message: error.message };
    throw error;
  }
  throw new Error("not refused");
}

describe("loadPrincipals and the file's mode", () => {
  const dir = mkdtempSync(join(tmpdir(), "principals-mode-"));

  it.each([0o666, 0o620, 0o602, 0o644, 0o640])(
    "refuses mode %o with invalid_config, naming the mode and the fix",
    (mode) => {
      const path = principalsFile(dir, mode, [alice.config]);
      expect(refusal(() => loadPrincipals(path))).toEqual({
        code: "invalid_config",
        message: `the principals file at ${path} is mode 0${mode.toString(8)}: it decides who may call, so others may not read or write it; chmod 600 ${path}`,
      });
    },
  );

  it.each([0o600, 0o400])("accepts mode %o", (mode) => {
    const path = principalsFile(dir, mode, [alice.config]);
    expect(loadPrincipals(path)).toEqual([{ ...alice.config, role: "agent" }]);
  });

  it("still tells a missing file as file_not_found", () => {
    expect(refusal(() => loadPrincipals(join(dir, "none.json"))).code).toBe("file_not_found");
  });
});

describe("tessera serve and the principals file's mode", () => {
  let dir: string;
  let store: string;
  let file: string;
  let served: ServeProcess;

  const status = async (token: string) =>
    (await call(served.url, "GET", "/v1/tools", { token })).status;

  async function hangUp(expected: RegExp): Promise<string> {
    const before = served.output().length;
    served.child.kill("SIGHUP");
    for (let waited = 0; waited < 10_000; waited += 50) {
      const said = served.output().slice(before);
      if (expected.test(said)) return said;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`no ${expected} after SIGHUP: ${served.output().slice(before)}`);
  }

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "principals-mode-serve-"));
    store = `sqlite:${join(dir, "t.db")}`;
    await (await openStores(store)).close();
    file = principalsFile(dir, 0o600, [alice.config]);
    served = await serveProcess(["--store", store, "--principals", file]);
  }, 30_000);

  afterAll(async () => {
    await served?.stop(2000);
  });

  it("refuses to start on a world-writable file", () => {
    const open = principalsFile(dir, 0o666, [alice.config]);
    const run = spawnSync(
      process.execPath,
      [BIN, "serve", "--store", store, "--principals", open, "--port", "0"],
      { encoding: "utf8", timeout: 60_000 },
    );
    expect(run.status).toBe(2);
    expect(run.stderr).toBe(
      `tessera: invalid_config: the principals file at ${open} is mode 0666: it decides who may call, so others may not read or write it; chmod 600 ${open}\n`,
    );
  });

  it("keeps the set in force when a reload finds the file loosened, and takes it once fixed", async () => {
    expect(await status(alice.token)).toBe(200);
    // Someone else may now write it, and has: their own token beside alice's.
    writeFileSync(file, JSON.stringify({ principals: [alice.config, mallory.config] }));
    for (const mode of [0o666, 0o620]) {
      chmodSync(file, mode);
      const said = await hangUp(/principals not reloaded/);
      expect(said).toContain(`the 1 in force stay: invalid_config: the principals file at ${file}`);
      expect(said).toContain(`is mode 0${mode.toString(8)}`);
      expect([await status(alice.token), await status(mallory.token)]).toEqual([200, 401]);
    }
    chmodSync(file, 0o600);
    await hangUp(/principals reloaded from .*: 2 in force/);
    expect([await status(alice.token), await status(mallory.token)]).toEqual([200, 200]);
  });
});
