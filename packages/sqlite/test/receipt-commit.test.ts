/**
 * A receipt's commit needs no fsync of its own (a lost receipt reads in_doubt): a batch of
 * settles alone commits at synchronous=NORMAL, and the configured FULL is back before any
 * other write. A write alone commits as configured; a batch that needs its flush commits at
 * NORMAL and is answered after the WAL is fsynced on the thread pool (counted by the WAL sync
 * itself). Each write's SQL is watched as it is fetched, inside its commit, together with the
 * `synchronous` level in effect at that moment.
 */
import { isTesseraError } from "@tessera/core";
import { afterEach, describe, expect, it, vi } from "vitest";
import { SqliteClaimStore } from "../src/claim-store.js";
import { parseSqliteUrl } from "../src/config.js";
import { SqliteDatabase } from "../src/database.js";
import { migrate } from "../src/migrations.js";
import type { WalSync } from "../src/wal-sync.js";
import { freshFile } from "./helpers.js";

const FULL = 2;
const NORMAL = 1;

const cleanups: (() => void)[] = [];
afterEach(() => {
  vi.restoreAllMocks();
  for (const cleanup of cleanups.splice(0)) cleanup();
});

function open(synchronous: "full" | "normal" = "full") {
  const file = freshFile();
  const db = SqliteDatabase.open(
    parseSqliteUrl(`sqlite:${file.path}?synchronous=${synchronous}`),
    "store_unavailable",
  );
  migrate(db, "store_unavailable");
  cleanups.push(() => {
    db.close();
    file.dispose();
  });
  return { db, claims: new SqliteClaimStore(db) };
}

/** Records `claim@level` / `settle@level` for each claim and settle statement, and pragmas. */
function watch(db: SqliteDatabase, failRestores = 0) {
  const seen: string[] = [];
  const original = SqliteDatabase.prototype.statement;
  let failures = failRestores;
  vi.spyOn(SqliteDatabase.prototype, "statement").mockImplementation(function (
    this: SqliteDatabase,
    sql: string,
  ) {
    if (sql.startsWith("PRAGMA")) {
      seen.push(sql);
      if (sql === "PRAGMA synchronous = FULL" && failures > 0) {
        failures--;
        throw Object.assign(new Error("disk I/O error"), { code: "SQLITE_IOERR" });
      }
    }
    const level = () => db.pragma("synchronous");
    if (sql.startsWith("INSERT INTO tessera_claims")) seen.push(`claim@${level()}`);
    if (sql.startsWith("UPDATE tessera_claims")) seen.push(`settle@${level()}`);
    return original.call(this, sql);
  });
  return seen;
}

const record = (tag: string) => ({ bodyHash: tag.padEnd(64, "0"), claimedAt: 1, worker: tag });
const key = (id: string) => ({ session: "s", functionCallId: id });
const receipt = { status: "dispatched", settledAt: 2 } as const;

describe("SQLite receipt commits", () => {
  it("at c=1 a settle commits at NORMAL and the claim right after it at FULL", async () => {
    const { db, claims } = open();
    const seen = watch(db);
    await claims.claim(key("a"), record("a"));
    await claims.settle(key("a"), receipt);
    await claims.claim(key("b"), record("b"));
    expect(seen).toEqual([
      `claim@${FULL}`,
      "PRAGMA synchronous = NORMAL",
      `settle@${NORMAL}`,
      "PRAGMA synchronous = FULL",
      `claim@${FULL}`,
    ]);
    expect(db.pragma("synchronous")).toBe(FULL);
    expect((await claims.get(key("a")))?.receipt).toEqual(receipt);
  });

  it("a batch of settles commits at NORMAL unsynced; a batch with a claim is answered after a WAL fsync", async () => {
    const { db, claims } = open();
    const sync = db.walSync as WalSync;
    const ids = Array.from({ length: 8 }, (_, i) => `k${i}`);
    // The first claim runs alone (its commit fsyncs as configured); the seven behind it are
    // one batch, committed at NORMAL and answered after one fsync on the thread pool.
    await Promise.all(ids.map((id) => claims.claim(key(id), record(id))));
    expect(sync.synced).toBe(1);
    const seen = watch(db);
    await Promise.all(ids.slice(0, 4).map((id) => claims.settle(key(id), receipt)));
    expect(seen.filter((entry) => entry.startsWith("settle@"))).toEqual(
      ids.slice(0, 4).map(() => `settle@${NORMAL}`),
    );
    expect(sync.synced).toBe(1);
    expect(db.pragma("synchronous")).toBe(FULL);
    seen.length = 0;
    await Promise.all([
      ...ids.slice(4).map((id) => claims.settle(key(id), receipt)),
      claims.claim(key("late"), record("late")),
    ]);
    expect(sync.synced).toBe(2);
    expect(seen.filter((entry) => entry.includes("@"))).toHaveLength(5);
    expect(seen.filter((entry) => entry.includes("@") && !entry.endsWith(`@${NORMAL}`))).toEqual(
      [],
    );
    expect(db.pragma("synchronous")).toBe(FULL);
    for (const id of ids) expect((await claims.get(key(id)))?.receipt).toEqual(receipt);
  });

  it("configured at NORMAL, a settle leaves the level alone", async () => {
    const { db, claims } = open("normal");
    const seen = watch(db);
    await claims.claim(key("a"), record("a"));
    await claims.settle(key("a"), receipt);
    expect(seen).toEqual([`claim@${NORMAL}`, `settle@${NORMAL}`]);
  });

  it("if FULL cannot be put back, the next write restores it first or fails closed", async () => {
    const { db, claims } = open();
    await claims.claim(key("a"), record("a"));
    await claims.claim(key("b"), record("b"));
    // Two failed restores: the settle's own (its commit stands), then the next claim's.
    const seen = watch(db, 2);
    await claims.settle(key("a"), receipt);
    expect(db.pragma("synchronous")).toBe(NORMAL);
    const refused = await claims.claim(key("c"), record("c")).catch((error: unknown) => error);
    expect(isTesseraError(refused) && refused.code).toBe("claim_store_unavailable");
    expect(await claims.get(key("c"))).toBeUndefined();
    // The third restore works, before the claim's statement runs.
    await claims.claim(key("c"), record("c"));
    expect(seen.filter((entry) => !entry.startsWith("PRAGMA synchronous = FULL"))).toEqual([
      "PRAGMA synchronous = NORMAL",
      `settle@${NORMAL}`,
      `claim@${FULL}`,
    ]);
    expect(db.pragma("synchronous")).toBe(FULL);
    expect((await claims.get(key("a")))?.receipt).toEqual(receipt);
  });
});
