/**
 * Group commit: writes issued in the same tick share one BEGIN IMMEDIATE … COMMIT, and each
 * caller still gets the answer it would get alone, in issue order. A batch that cannot commit
 * fails every caller in it with its own port's `*_unavailable`, and leaves nothing behind.
 */
import { isTesseraError } from "@tessera/core";
import BetterSqlite3 from "better-sqlite3";
import { afterEach, describe, expect, it, vi } from "vitest";
import { SqliteClaimStore } from "../src/claim-store.js";
import { parseSqliteUrl } from "../src/config.js";
import { SqliteDatabase } from "../src/database.js";
import { migrate } from "../src/migrations.js";
import { SqliteUsageStore } from "../src/usage-store.js";
import { countCommits } from "./commit-counter.js";
import { freshFile } from "./helpers.js";

const cleanups: (() => void)[] = [];
afterEach(() => {
  vi.restoreAllMocks();
  for (const cleanup of cleanups.splice(0)) cleanup();
});

function open(options = "busyTimeoutMs=50") {
  const file = freshFile();
  const db = SqliteDatabase.open(
    parseSqliteUrl(`sqlite:${file.path}?${options}`),
    "store_unavailable",
  );
  migrate(db, "store_unavailable");
  cleanups.push(() => {
    db.close();
    file.dispose();
  });
  return { db, path: file.path, claims: new SqliteClaimStore(db), usage: new SqliteUsageStore(db) };
}

const record = (tag: string) => ({ bodyHash: tag.padEnd(64, "0"), claimedAt: 1, worker: tag });

async function settled<T>(promises: Promise<T>[]) {
  return Promise.allSettled(promises);
}

function codeOf(result: PromiseSettledResult<unknown>): string | undefined {
  return result.status === "rejected" && isTesseraError(result.reason)
    ? result.reason.code
    : undefined;
}

describe("SQLite group commit", () => {
  it("64 claims issued together share one transaction; per key, the first issued wins", async () => {
    const { claims } = open();
    // Every batch goes through `run` once (file check, then the transaction); before group
    // commit every write did. The first write of the tick runs at once (the store was idle),
    // the 63 behind it share one transaction.
    const transactions = vi.spyOn(SqliteDatabase.prototype, "run");
    const same = { session: "s", functionCallId: "same" };
    const calls = Array.from({ length: 64 }, (_, i) =>
      i % 2 === 0
        ? claims.claim(same, record(`same-${i}`))
        : claims.claim({ session: "s", functionCallId: `own-${i}` }, record(`own-${i}`)),
    );
    const results = await Promise.all(calls);
    expect(transactions).toHaveBeenCalledTimes(2);
    results.forEach((result, i) => {
      if (i === 0) expect(result).toEqual({ status: "claimed" });
      else if (i % 2 === 0) {
        expect(result).toEqual({
          status: "already_claimed",
          existing: { ...same, ...record("same-0") },
        });
      } else expect(result).toEqual({ status: "claimed" });
    });
    expect(await claims.get(same)).toEqual({ ...same, ...record("same-0") });
  });

  it("1,100 writes issued together go in batches of at most 512, every one answered", async () => {
    const { claims } = open();
    const batches = vi.spyOn(SqliteDatabase.prototype, "run");
    const results = await Promise.all(
      Array.from({ length: 1100 }, (_, i) =>
        claims.claim({ session: "s", functionCallId: `c${i}` }, record(`c${i}`)),
      ),
    );
    // The first at once (idle store), then 512 + 512 + 75.
    expect(batches).toHaveBeenCalledTimes(4);
    expect(results.every((result) => result.status === "claimed")).toBe(true);
  });

  it("64 consumes of one ticket (maxUses 5) in one batch: the first 5 issued win, counts 1..5", async () => {
    const { usage } = open();
    const results = await Promise.all(
      Array.from({ length: 64 }, () => usage.tryConsume("ns", "ticket", 5)),
    );
    expect(results.slice(0, 5)).toEqual([1, 2, 3, 4, 5].map((used) => ({ consumed: true, used })));
    for (const result of results.slice(5)) expect(result).toEqual({ consumed: false, used: 5 });
    expect(await usage.getUsage("ns", "ticket")).toBe(5);
  });

  it("a carve that does not fit spends nothing; the single use behind it still gets the last one", async () => {
    const { usage } = open();
    await usage.tryConsumeMany("ns", "budget", 3, 4);
    const [carve, single, after] = await Promise.all([
      usage.tryConsumeMany("ns", "budget", 2, 4),
      usage.tryConsume("ns", "budget", 4),
      usage.tryConsume("ns", "budget", 4),
    ]);
    expect(carve).toEqual({ consumed: false, used: 3 });
    expect(single).toEqual({ consumed: true, used: 4 });
    expect(after).toEqual({ consumed: false, used: 4 });
  });

  it("a settle refused on its own terms (no such claim) does not sink the rest of its batch", async () => {
    const { claims } = open();
    const key = { session: "s", functionCallId: "c" };
    await claims.claim(key, record("c"));
    const receipt = { status: "dispatched" as const, settledAt: 2 };
    const [good, unknown, claimed] = (await settled<unknown>([
      claims.settle(key, receipt),
      claims.settle({ session: "s", functionCallId: "never" }, receipt),
      claims.claim({ session: "s", functionCallId: "d" }, record("d")),
    ])) as PromiseSettledResult<unknown>[];
    expect(good?.status).toBe("fulfilled");
    expect(codeOf(unknown as PromiseSettledResult<unknown>)).toBe("invalid_input");
    expect(claimed).toEqual({ status: "fulfilled", value: { status: "claimed" } });
    expect((await claims.get(key))?.receipt).toEqual(receipt);
  });

  it("a batch that hits a full disk fails every caller closed, each with its port's code, and writes nothing", async () => {
    const { db, claims, usage } = open();
    await usage.tryConsume("ns", "ticket", 10);
    const pages = Number(db.pragma("page_count"));
    db.exec(`PRAGMA max_page_count = ${pages}`);
    // Long IDs: the writes need new pages, which the file may not grow to (SQLITE_FULL). The
    // first runs at once (the store was idle) and fails alone; the rest are one batch, in
    // which the consume fits in an existing page but must not land either.
    const keys = Array.from({ length: 64 }, (_, i) => ({
      session: "s",
      functionCallId: `${i}-${"x".repeat(2000)}`,
    }));
    const [first, ...rest] = keys;
    const results = await settled<unknown>([
      claims.claim(first as (typeof keys)[0], record("full")),
      usage.tryConsume("ns", "ticket", 10),
      ...rest.map((key) => claims.claim(key, record("full"))),
    ]);
    expect(codeOf(results[0] as PromiseSettledResult<unknown>)).toBe("claim_store_unavailable");
    expect(codeOf(results[1] as PromiseSettledResult<unknown>)).toBe("usage_store_unavailable");
    for (const result of results.slice(2)) expect(codeOf(result)).toBe("claim_store_unavailable");
    db.exec("PRAGMA max_page_count = 1073741823");
    // Rolled back whole: the consume that fit in an existing page did not land either.
    expect(await usage.getUsage("ns", "ticket")).toBe(1);
    for (const key of keys) expect(await claims.get(key)).toBeUndefined();
    expect(await claims.claim(first as (typeof keys)[0], record("again"))).toEqual({
      status: "claimed",
    });
  });

  it("a batch that cannot take the write lock (busy past the timeout) fails every caller closed", async () => {
    const { path, claims, usage } = open();
    const holder = new BetterSqlite3(path);
    holder.exec("BEGIN IMMEDIATE");
    try {
      const results = await settled<unknown>([
        claims.claim({ session: "s", functionCallId: "a" }, record("a")),
        usage.tryConsume("ns", "t", 1),
        claims.claim({ session: "s", functionCallId: "b" }, record("b")),
      ]);
      expect(results.map(codeOf)).toEqual([
        "claim_store_unavailable",
        "usage_store_unavailable",
        "claim_store_unavailable",
      ]);
    } finally {
      holder.exec("ROLLBACK");
      holder.close();
    }
    expect(await claims.claim({ session: "s", functionCallId: "a" }, record("a"))).toEqual({
      status: "claimed",
    });
    expect(await usage.getUsage("ns", "t")).toBe(0);
  });

  it("a connection closed while a batch waits fails its callers closed", async () => {
    const { db, claims } = open();
    // The first runs at once (idle store); the second waits for the flush, and the
    // connection closes before it.
    const pending = settled([
      claims.claim({ session: "s", functionCallId: "a" }, record("a")),
      claims.claim({ session: "s", functionCallId: "b" }, record("b")),
    ]);
    db.close();
    const [first, second] = await pending;
    expect(first).toEqual({ status: "fulfilled", value: { status: "claimed" } });
    expect(codeOf(second as PromiseSettledResult<unknown>)).toBe("claim_store_unavailable");
  });

  it("a write alone runs at once; after a batch of several, writes are queued again", async () => {
    const { claims } = open();
    const runs = vi.spyOn(SqliteDatabase.prototype, "run");
    const alone = claims.claim({ session: "s", functionCallId: "alone" }, record("alone"));
    expect(runs).toHaveBeenCalledTimes(1);
    await alone;
    await Promise.all(
      ["x", "y", "z"].map((id) => claims.claim({ session: "s", functionCallId: id }, record(id))),
    );
    runs.mockClear();
    // The last batch held two writes: this one waits for the flush, with whatever follows.
    const queued = claims.claim({ session: "s", functionCallId: "q" }, record("q"));
    expect(runs).toHaveBeenCalledTimes(0);
    expect(await queued).toEqual({ status: "claimed" });
  });

  it("64 callers in a pool, each answer starting the next write: writes share commits", async () => {
    const { claims } = open();
    const counter = countCommits();
    cleanups.push(() => counter.stop());
    const ops = 1_024;
    let next = 0;
    await Promise.all(
      Array.from({ length: 64 }, async () => {
        while (next < ops) {
          const id = `p${next++}`;
          await claims.claim({ session: "s", functionCallId: id }, record(id));
        }
      }),
    );
    // A write alone while others wait for their fsync would answer at once and start a chain
    // of writes, each alone: 1,024 commits. Batched, a few dozen.
    expect(counter.commits).toBeLessThan(ops / 8);
    expect(await claims.get({ session: "s", functionCallId: `p${ops - 1}` })).toBeDefined();
  });
});
