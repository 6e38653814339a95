/**
 * A batch of several writes on a file at FULL commits without its inline fsync and is synced
 * from the thread pool: no caller hears before that sync returned, a failed sync fails every
 * caller of the batch closed, and a `-wal` file replaced under the connection is never
 * "synced" in its place. A write alone keeps its inline fsync.
 */
import { renameSync, writeFileSync } from "node:fs";
import { isTesseraError } from "@tessera/core";
import { afterEach, describe, expect, it, vi } from "vitest";
import { SqliteClaimStore } from "../src/claim-store.js";
import { parseSqliteUrl } from "../src/config.js";
import { SqliteDatabase } from "../src/database.js";
import { migrate } from "../src/migrations.js";
import { WalSync } from "../src/wal-sync.js";
import { freshFile } from "./helpers.js";

const cleanups: (() => void)[] = [];
afterEach(() => {
  vi.restoreAllMocks();
  for (const cleanup of cleanups.splice(0)) cleanup();
});

function open(synchronous: "full" | "normal" = "full") {
  const file = freshFile();
  const db = SqliteDatabase.open(
    parseSqliteUrl(`sqlite:${file.path}?synchronous=${synchronous}&busyTimeoutMs=50`),
    "store_unavailable",
  );
  migrate(db, "store_unavailable");
  cleanups.push(() => {
    db.close();
    file.dispose();
  });
  return { db, path: file.path, claims: new SqliteClaimStore(db) };
}

const record = (tag: string) => ({ bodyHash: tag.padEnd(64, "0"), claimedAt: 1, worker: tag });
const key = (id: string) => ({ session: "s", functionCallId: id });
const ids = (n: number, tag: string) => Array.from({ length: n }, (_, i) => `${tag}${i}`);

/** Holds every sync until `release` (or `fail`) is called. */
function holdSyncs() {
  let release!: () => void;
  let fail!: (error: unknown) => void;
  const held = new Promise<void>((resolve, reject) => {
    release = resolve;
    fail = reject;
  });
  const spy = vi.spyOn(WalSync.prototype, "afterCommit").mockImplementation(() => held);
  return { spy, release: () => release(), fail: (error: unknown) => fail(error) };
}

describe("SQLite batches synced off the thread", () => {
  it("answer nobody before the sync, then every caller its own result", async () => {
    const { db, claims } = open();
    const sync = holdSyncs();
    const answered: string[] = [];
    const calls = ids(8, "k").map((id) =>
      claims.claim(key(id), record(id)).then((result) => {
        answered.push(id);
        return result;
      }),
    );
    // The duplicate in the same batch loses to the first, as without the sync.
    const duplicate = claims.claim(key("k0"), record("other"));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(sync.spy).toHaveBeenCalledTimes(1);
    // The tick's first write ran alone, with its inline fsync; the batch behind it waits.
    expect(answered).toEqual(["k0"]);
    // Committed already (the rows are in the file), though no caller has heard.
    const count = db.statement("SELECT count(*) AS n FROM tessera_claims").get() as { n: number };
    expect(count.n).toBe(8);
    sync.release();
    const results = await Promise.all(calls);
    expect(results.map((r) => r.status)).toEqual(ids(8, "k").map(() => "claimed"));
    expect((await duplicate).status).toBe("already_claimed");
  });

  it("hold writes that arrive during a sync, in any tick, for one batch after it", async () => {
    const { db, claims } = open();
    const sync = holdSyncs();
    const first = ids(3, "a").map((id) => claims.claim(key(id), record(id)));
    const later: Promise<unknown>[] = [];
    for (const id of ids(3, "late")) {
      await new Promise((resolve) => setTimeout(resolve, 2));
      later.push(claims.claim(key(id), record(id)));
    }
    const count = () =>
      (db.statement("SELECT count(*) AS n FROM tessera_claims").get() as { n: number }).n;
    // The first tick's lone write and its batch are in; the three later ones wait.
    expect(count()).toBe(3);
    expect(sync.spy).toHaveBeenCalledTimes(1);
    sync.release();
    await Promise.all([...first, ...later]);
    expect(count()).toBe(6);
    expect(sync.spy).toHaveBeenCalledTimes(2);
  });

  it("fail every caller of the batch closed when the sync fails", async () => {
    const { claims } = open();
    const sync = holdSyncs();
    const calls = ids(4, "f").map((id) => claims.claim(key(id), record(id)).catch((e) => e));
    await new Promise((resolve) => setTimeout(resolve, 5));
    sync.fail(Object.assign(new Error("I/O error"), { code: "EIO" }));
    const [alone, ...batched] = await Promise.all(calls);
    expect(alone).toMatchObject({ status: "claimed" });
    for (const refused of batched) {
      expect(isTesseraError(refused) && refused.code).toBe("claim_store_unavailable");
    }
  });

  it("keep the inline fsync for a write alone, and sync nothing configured at NORMAL", async () => {
    const full = open();
    const spy = vi.spyOn(WalSync.prototype, "afterCommit");
    await full.claims.claim(key("alone"), record("alone"));
    expect(spy).not.toHaveBeenCalled();
    const normal = open("normal");
    await Promise.all(ids(6, "n").map((id) => normal.claims.claim(key(id), record(id))));
    expect(spy).not.toHaveBeenCalled();
    await Promise.all(ids(6, "b").map((id) => full.claims.claim(key(id), record(id))));
    expect(spy).toHaveBeenCalledTimes(1);
  });

  it("refuse to sync a -wal file that replaced the one the connection writes", async () => {
    const { claims, path } = open();
    // A first batch opens the sync's own descriptor of the real log.
    await Promise.all(ids(4, "a").map((id) => claims.claim(key(id), record(id))));
    renameSync(`${path}-wal`, `${path}-wal.moved`);
    writeFileSync(`${path}-wal`, "");
    // After a batch of several, every write of the next tick is queued: one batch, all refused.
    const refused = await Promise.all(
      ids(4, "r").map((id) => claims.claim(key(id), record(id)).catch((e) => e)),
    );
    for (const error of refused) {
      expect(isTesseraError(error) && error.code).toBe("claim_store_unavailable");
    }
  });
});

describe("WalSync", () => {
  it("gives commits made while a sync runs the next sync, one for all of them", async () => {
    const { path, claims } = open();
    await claims.claim(key("x"), record("x"));
    const wal = new WalSync(path);
    const first = wal.afterCommit();
    const second = wal.afterCommit();
    const third = wal.afterCommit();
    expect(second).toBe(third);
    expect(second).not.toBe(first);
    await Promise.all([first, second, third]);
    wal.close();
  });

  it("fails closed when the log is missing", async () => {
    const { path } = open();
    const wal = new WalSync(`${path}.nothing-here`);
    await expect(wal.afterCommit()).rejects.toThrow();
    wal.close();
  });
});
