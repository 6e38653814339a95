/**
 * Opening, closing and refusing: what the SQLite backend does when the file cannot be
 * opened, when it is closed under the kernel, when its schema is newer than the code, and
 * when its primitives do not hold (the self-test).
 */
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import {
  openAuditSink,
  openClaimStore,
  openGrantStore,
  openStores,
  openUsageStore,
  SCHEMA_VERSION,
} from "@tessera/sqlite";
import { expectClosedStoresRefuse } from "@tessera/testkit";
import BetterSqlite3 from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { freshFile } from "./helpers.js";

async function codeOf(action: () => unknown): Promise<string | undefined> {
  try {
    await action();
  } catch (error) {
    return (error as { code?: string }).code;
  }
  return undefined;
}

const files: { dispose(): void }[] = [];
function file(): string {
  const made = freshFile();
  files.push(made);
  return made.path;
}
afterEach(() => {
  for (const made of files.splice(0)) made.dispose();
});

const key = { session: "s", functionCallId: "c" };
const record = { bodyHash: "h", claimedAt: 1 };
describe("opening", () => {
  it("creates the file in WAL mode with synchronous=FULL by default", async () => {
    const path = file();
    const stores = await openStores(`sqlite:${path}`);
    await stores.close();
    const raw = new BetterSqlite3(path);
    expect(raw.pragma("journal_mode", { simple: true })).toBe("wal");
    expect(
      raw.prepare("SELECT version FROM tessera_schema_version ORDER BY version").all(),
    ).toEqual(Array.from({ length: SCHEMA_VERSION }, (_, i) => ({ version: i + 1 })));
    raw.close();
  });

  it("migrations are idempotent: reopening applies nothing twice", async () => {
    const path = file();
    for (let i = 0; i < 3; i++) await (await openStores(`sqlite:${path}`)).close();
    const raw = new BetterSqlite3(path);
    expect(raw.prepare("SELECT count(*) AS n FROM tessera_schema_version").get()).toEqual({
      n: SCHEMA_VERSION,
    });
    raw.close();
  });

  it("keeps data across a reopen", async () => {
    const path = file();
    const first = await openStores(`sqlite:${path}`);
    await first.claims.claim(key, record);
    await first.usage.tryConsume("ns", "g", 1);
    await first.close();
    const second = await openStores(`sqlite:${path}?synchronous=normal`);
    expect((await second.claims.claim(key, record)).status).toBe("already_claimed");
    expect(await second.usage.tryConsume("ns", "g", 1)).toEqual({ consumed: false, used: 1 });
    await second.close();
  });

  it("an unopenable file fails with the *_unavailable code of what was opened", async () => {
    const dir = join(file(), "..");
    const missing = `sqlite:${join(dir, "no", "such", "dir", "t.db")}`;
    expect(await codeOf(() => openStores(missing))).toBe("store_unavailable");
    expect(await codeOf(() => openClaimStore(missing))).toBe("claim_store_unavailable");
    expect(await codeOf(() => openUsageStore(missing))).toBe("usage_store_unavailable");
    expect(await codeOf(() => openGrantStore(missing))).toBe("grant_store_unavailable");
    expect(await codeOf(() => openAuditSink(missing))).toBe("audit_unavailable");
    // The message names why, as the OS says it (the driver said only "TypeError").
    await expect(openStores(missing)).rejects.toThrow("could not open the SQLite store (ENOENT)");
    const directory = join(dir, "a-directory");
    mkdirSync(directory);
    expect(await codeOf(() => openStores(`sqlite:${directory}`))).toBe("store_unavailable");
  });

  it("create=false refuses a missing file and creates nothing; it opens a provisioned one", async () => {
    const path = file();
    expect(await codeOf(() => openStores(`sqlite:${path}?create=false`))).toBe("store_unavailable");
    expect(await codeOf(() => openClaimStore(`sqlite:${path}?create=false`))).toBe(
      "claim_store_unavailable",
    );
    expect(existsSync(path)).toBe(false);
    await (await openStores(`sqlite:${path}`)).close();
    const claims = await openClaimStore(`sqlite:${path}?create=false`);
    expect(await claims.claim(key, record)).toEqual({ status: "claimed" });
    await claims.close();
  });

  it("refuses a schema newer than this code with schema_unavailable", async () => {
    const path = file();
    await (await openStores(`sqlite:${path}`)).close();
    const raw = new BetterSqlite3(path);
    raw
      .prepare("INSERT INTO tessera_schema_version VALUES (?, ?)")
      .run(SCHEMA_VERSION + 1, "later");
    raw.close();
    expect(await codeOf(() => openStores(`sqlite:${path}`))).toBe("schema_unavailable");
  });
});

describe("self-test at open", () => {
  it("refuses a file whose claim table lets a key be inserted twice", async () => {
    const path = file();
    const raw = new BetterSqlite3(path);
    await (await openStores(`sqlite:${path}`)).close();
    // Tampered schema: the same version number, but the claim key is no longer unique.
    raw.exec(`DROP TABLE tessera_claims;
      CREATE TABLE tessera_claims (session TEXT, function_call_id TEXT,
        body_hash TEXT, claimed_at INTEGER, worker TEXT, receipt_status TEXT, settled_at INTEGER);`);
    raw.close();
    expect(await codeOf(() => openStores(`sqlite:${path}`))).toBe("store_self_test_failed");
    expect(await codeOf(() => openClaimStore(`sqlite:${path}`))).toBe("store_self_test_failed");
    // With the self-test off the broken file opens: the check is what stands in the way.
    const unchecked = await openStores(`sqlite:${path}?selfTest=false`);
    await unchecked.close();
  });

  it("refuses a file where a bounded consume does not stop at its bound", async () => {
    const path = file();
    await (await openStores(`sqlite:${path}`)).close();
    const raw = new BetterSqlite3(path);
    raw.exec(`CREATE TRIGGER forget_usage AFTER UPDATE ON tessera_usage
      BEGIN UPDATE tessera_usage SET used = 0 WHERE rowid = NEW.rowid; END;`);
    raw.close();
    expect(await codeOf(() => openStores(`sqlite:${path}`))).toBe("store_self_test_failed");
  });

  it("leaves no probe rows behind", async () => {
    const path = file();
    await (await openStores(`sqlite:${path}`)).close();
    const raw = new BetterSqlite3(path);
    expect(raw.prepare("SELECT count(*) AS n FROM tessera_claims").get()).toEqual({ n: 0 });
    expect(raw.prepare("SELECT count(*) AS n FROM tessera_usage").get()).toEqual({ n: 0 });
    raw.close();
  });
});

describe("a closed store fails closed", () => {
  it("every port of a closed bundle refuses with its *_unavailable code", async () => {
    const stores = await openStores(`sqlite:${file()}`);
    await stores.claims.claim(key, record);
    await stores.close();
    await expectClosedStoresRefuse(stores);
  });

  it("a deleted file fails closed and is not recreated under the running connection", async () => {
    const path = file();
    const stores = await openStores(`sqlite:${path}`);
    await stores.claims.claim(key, record);
    for (const suffix of ["", "-wal", "-shm"]) rmSync(`${path}${suffix}`, { force: true });
    expect(await codeOf(() => stores.claims.claim(key, record))).toBe("claim_store_unavailable");
    expect(await codeOf(() => stores.usage.tryConsume("ns", "g", 1))).toBe(
      "usage_store_unavailable",
    );
    expect(await codeOf(() => stores.audit.read())).toBe("audit_unavailable");
    expect(existsSync(path)).toBe(false);
    await stores.close();
  });

  it("a file replaced at its path fails closed: the new file's claims are not mixed in", async () => {
    const path = file();
    const stores = await openStores(`sqlite:${path}`);
    await stores.claims.claim(key, record);
    for (const suffix of ["", "-wal", "-shm"]) rmSync(`${path}${suffix}`, { force: true });
    const replacement = await openStores(`sqlite:${path}`);
    expect(await replacement.claims.claim(key, record)).toEqual({ status: "claimed" });
    expect(await codeOf(() => stores.claims.get(key))).toBe("claim_store_unavailable");
    expect(await codeOf(() => stores.claims.claim(key, record))).toBe("claim_store_unavailable");
    await replacement.close();
    await stores.close();
  });

  it("a claim store's own close() refuses further claims; its file keeps the claim", async () => {
    const path = file();
    const claims = await openClaimStore(`sqlite:${path}`);
    await claims.claim(key, record);
    await claims.close();
    expect(await codeOf(() => claims.claim(key, record))).toBe("claim_store_unavailable");
    const again = await openClaimStore(`sqlite:${path}`);
    expect((await again.claim(key, record)).status).toBe("already_claimed");
    await again.close();
  });

  it("closing a bundle's claim store leaves the bundle's other ports working", async () => {
    const stores = await openStores(`sqlite:${file()}`);
    await stores.claims.close();
    expect(await codeOf(() => stores.claims.get(key))).toBe("claim_store_unavailable");
    expect(await stores.usage.tryConsume("ns", "g", 1)).toEqual({ consumed: true, used: 1 });
    await stores.close();
  });
});
