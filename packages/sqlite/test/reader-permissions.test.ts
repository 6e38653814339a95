/**
 * An auditor who may read the store's file but not write it or its directory, played by the
 * `nobody` OS user in a child process (so the test needs root, as CI runs). A WAL database's
 * reader shares the writer's index (`-shm`): while the service holds the file open the
 * auditor reads every event, those still in the WAL included; once the store is closed cleanly
 * the index is gone and the reader, which cannot create one, is refused with the driver's code
 * named (what docs/operations.md, "An auditor's credentials", tells the operator). Either way
 * nothing of the store changes.
 */
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { openStores } from "@tessera/sqlite";
import { auditEvent } from "@tessera/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { runScript } from "./helpers.js";

const asRoot = userInfo().uid === 0;
const suite = asRoot ? describe : describe.skip;

const SCRIPT = `
import { openAuditReader } from "@tessera/sqlite";
try {
  const reader = await openAuditReader(process.argv[1]);
  const events = await reader.read();
  await reader.close();
  process.stdout.write(JSON.stringify({ events: events.map((event) => event.callId) }));
} catch (error) {
  process.stdout.write(JSON.stringify({ code: error.code, message: error.message }));
}
`;

/** The reader run as `nobody`: what it read, or the code and message it was refused with. */
async function readAsNobody(
  url: string,
): Promise<{ events?: string[]; code?: string; message?: string }> {
  return JSON.parse(await runScript(SCRIPT, [url], ["runuser", "-u", "nobody", "--"]));
}

const folders: string[] = [];
afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

/** A store's folder that others may enter and read, but only root may write. */
function sharedFolder(): string {
  const folder = mkdtempSync(join(tmpdir(), "tessera-reader-"));
  folders.push(folder);
  chmodSync(folder, 0o755);
  return folder;
}

suite("SQLite audit reader, as a user who may only read the file (needs root: runs as nobody)", () => {
  it("reads every event while the service holds the file open, WAL included", async () => {
    const path = join(sharedFolder(), "tessera.db");
    const stores = await openStores(`sqlite:${path}`);
    try {
      for (let i = 0; i < 5; i++) await stores.audit.append(auditEvent(i));
      for (const name of readdirSync(join(path, ".."))) chmodSync(join(path, "..", name), 0o644);
      const read = await readAsNobody(`sqlite:${path}`);
      expect(read).toEqual({ events: (await stores.audit.read()).map((event) => event.callId) });
      expect(read.events).toHaveLength(5);
    } finally {
      await stores.close();
    }
  });

  it("a store closed cleanly is refused, naming SQLITE_READONLY_DIRECTORY, and left as it was", async () => {
    const folder = sharedFolder();
    const path = join(folder, "tessera.db");
    const stores = await openStores(`sqlite:${path}`);
    await stores.audit.append(auditEvent(1));
    await stores.close();
    chmodSync(path, 0o644);
    expect(readdirSync(folder)).toEqual(["tessera.db"]);
    const read = await readAsNobody(`sqlite:${path}`);
    expect(read).toEqual({
      code: "audit_unavailable",
      message: "could not open the SQLite store (SQLITE_READONLY_DIRECTORY)",
    });
    expect(readdirSync(folder)).toEqual(["tessera.db"]);
    expect(existsSync(`${path}-shm`)).toBe(false);
  });
});
