import { readdirSync, readlinkSync } from "node:fs";
import BetterSqlite3 from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { WalSync } from "../src/wal-sync.js";
import { freshFile } from "./helpers.js";

/**
 * The WAL sync keeps one descriptor of the WAL for all its fsyncs (wal-sync.ts): an open and a
 * close around each were two more trips through the thread pool. Counted in this process's
 * descriptor table, where SQLite's own descriptor of the WAL is open beside it.
 */
const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

/** Descriptors of this process open on `path`. */
function openOn(path: string): number {
  let count = 0;
  for (const fd of readdirSync("/proc/self/fd")) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`) === path) count++;
    } catch {
      // Closed while listed (the listing's own descriptor among them).
    }
  }
  return count;
}

function walDatabase() {
  const file = freshFile();
  const db = new BetterSqlite3(file.path);
  db.pragma("journal_mode = WAL");
  db.exec("CREATE TABLE t (v INTEGER)");
  cleanups.push(() => {
    if (db.open) db.close();
    file.dispose();
  });
  return { db, wal: `${file.path}-wal`, path: file.path };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 20));

describe("the WAL sync's descriptor", () => {
  it("is opened once for every sync, and closed with the sync", async () => {
    const { db, wal, path } = walDatabase();
    const sqliteOwn = openOn(wal);
    expect(sqliteOwn).toBeGreaterThanOrEqual(1);
    const sync = new WalSync(path);
    for (let i = 0; i < 20; i++) {
      db.prepare("INSERT INTO t VALUES (?)").run(i);
      await sync.flush();
      expect(openOn(wal)).toBe(sqliteOwn + 1);
    }
    expect(sync.synced).toBe(20);
    // Commits made together share a sync, still through the one descriptor.
    await Promise.all(Array.from({ length: 8 }, () => sync.flush()));
    expect(openOn(wal)).toBe(sqliteOwn + 1);
    sync.close();
    await settle();
    expect(openOn(wal)).toBe(sqliteOwn);
  });

  it("closed while an fsync is in flight, it is closed once that fsync returns", async () => {
    const { db, wal, path } = walDatabase();
    const sqliteOwn = openOn(wal);
    const sync = new WalSync(path);
    db.prepare("INSERT INTO t VALUES (1)").run();
    await sync.flush();
    const inFlight = sync.flush();
    sync.close();
    await inFlight;
    await settle();
    expect(openOn(wal)).toBe(sqliteOwn);
  });

  it("a WAL missing at the first sync is nothing to sync, and nothing is kept open", async () => {
    const file = freshFile();
    cleanups.push(() => file.dispose());
    const sync = new WalSync(file.path);
    await expect(sync.flush()).resolves.toBeUndefined();
    sync.close();
  });
});
