/**
 * Batching: claims, settles and consumes that arrive while a statement is in flight go as one
 * statement, and each caller still gets the answer it would get alone, in issue order. A
 * batch whose connection is cut fails every caller in it with the port's `*_unavailable`.
 */
import { claimKeyDigest, storageDigest } from "@tessera/core/store-kit";
import { serviceUrl } from "@tessera/testkit";
import pg from "pg";
import { describe, expect, it, vi } from "vitest";
import { Database } from "../src/database.js";
import {
  codeOf,
  storesPerTest,
  terminateOwnBackends,
  waitUntilAnswering,
} from "./support/pg-test-stores.js";

const url = serviceUrl("TESSERA_PG_URL");
const suite = url ? describe : describe.skip;

const opened = storesPerTest(url);

/** A second, direct connection that holds a row lock, so a batch waits on it (in flight). */
async function holdLock(schema: string, sql: string, values: unknown[]): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url as string });
  await client.connect();
  await client.query("BEGIN");
  await client.query(sql.replaceAll("$schema", `"${schema}"`), values);
  return client;
}

/** Waits until one of this test's sessions is blocked on a lock (the batch is in flight). */
async function untilWaiting(admin: pg.Client, applicationName: string): Promise<void> {
  for (;;) {
    const { rows } = await admin.query(
      "SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'",
      [applicationName],
    );
    if (rows.length > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const record = (tag: string) => ({ bodyHash: tag.padEnd(64, "0"), claimedAt: 1, worker: tag });

suite("postgres batching", () => {
  it("64 claims in flight go in a few statements; per key, the first issued wins", async () => {
    const { stores } = await opened();
    const queries = vi.spyOn(Database.prototype, "query");
    const same = { session: "s", functionCallId: "same" };
    const results = await Promise.all(
      Array.from({ length: 64 }, (_, i) =>
        i % 2 === 0
          ? stores.claims.claim(same, record(`same-${i}`))
          : stores.claims.claim({ session: "s", functionCallId: `own-${i}` }, record(`own-${i}`)),
      ),
    );
    // One insert for the batch, one read of the keys that lost to the batch's own winner.
    expect(queries.mock.calls.length).toBeLessThanOrEqual(4);
    results.forEach((result, i) => {
      if (i === 0 || i % 2 === 1) expect(result).toEqual({ status: "claimed" });
      else {
        expect(result).toEqual({
          status: "already_claimed",
          existing: { ...same, ...record("same-0") },
        });
      }
    });
    expect(await stores.claims.get(same)).toEqual({ ...same, ...record("same-0") });
  });

  it("a batch of claims of keys held before it: every caller gets the holder's record", async () => {
    const { stores } = await opened();
    const keys = Array.from({ length: 16 }, (_, i) => ({ session: "s", functionCallId: `k${i}` }));
    for (const key of keys.slice(0, 8)) await stores.claims.claim(key, record("before"));
    const results = await Promise.all(keys.map((key) => stores.claims.claim(key, record("now"))));
    results.forEach((result, i) => {
      if (i < 8) {
        expect(result).toEqual({
          status: "already_claimed",
          existing: { ...keys[i], ...record("before") },
        });
      } else expect(result).toEqual({ status: "claimed" });
    });
  });

  it("64 consumes of one ticket (maxUses 5) in flight: the first 5 issued win, counts 1..5", async () => {
    const { stores } = await opened();
    const results = await Promise.all(
      Array.from({ length: 64 }, () => stores.usage.tryConsume("ns", "ticket", 5)),
    );
    expect(results.slice(0, 5)).toEqual([1, 2, 3, 4, 5].map((used) => ({ consumed: true, used })));
    for (const result of results.slice(5)) expect(result).toEqual({ consumed: false, used: 5 });
    expect(await stores.usage.getUsage("ns", "ticket")).toBe(5);
  });

  it("grouped consumes on existing counters: one statement, each caller its own count", async () => {
    const { stores } = await opened();
    for (let g = 0; g < 8; g++) await stores.usage.tryConsume("ns", `g${g}`, 100);
    const queries = vi.spyOn(Database.prototype, "query");
    const results = await Promise.all(
      Array.from({ length: 64 }, (_, i) => stores.usage.tryConsume("ns", `g${i % 8}`, 100)),
    );
    expect(queries.mock.calls.length).toBeLessThanOrEqual(4);
    results.forEach((result, i) => {
      expect(result).toEqual({ consumed: true, used: 2 + Math.floor(i / 8) });
    });
    for (let g = 0; g < 8; g++) expect(await stores.usage.getUsage("ns", `g${g}`)).toBe(9);
  });

  it("a carve that does not fit spends nothing; the single use behind it gets the last one", async () => {
    const { stores } = await opened();
    const carveMany = stores.usage.tryConsumeMany?.bind(stores.usage);
    if (!carveMany) throw new Error("the PostgreSQL usage store carves");
    await carveMany("ns", "budget", 3, 4);
    const [carve, single, after] = await Promise.all([
      carveMany("ns", "budget", 2, 4),
      stores.usage.tryConsume("ns", "budget", 4),
      stores.usage.tryConsume("ns", "budget", 4),
    ]);
    expect(carve).toEqual({ consumed: false, used: 3 });
    expect(single).toEqual({ consumed: true, used: 4 });
    expect(after).toEqual({ consumed: false, used: 4 });
  });

  it("settles in one batch: the first outcome per key stands, an unknown key is refused alone", async () => {
    const { stores } = await opened();
    const keys = Array.from({ length: 8 }, (_, i) => ({ session: "s", functionCallId: `k${i}` }));
    for (const key of keys) await stores.claims.claim(key, record("c"));
    const results = await Promise.allSettled([
      ...keys.map((key) => stores.claims.settle(key, { status: "dispatched", settledAt: 2 })),
      stores.claims.settle(keys[0] as (typeof keys)[0], { status: "failed", settledAt: 3 }),
      stores.claims.settle(
        { session: "s", functionCallId: "never" },
        { status: "denied", settledAt: 2 },
      ),
    ]);
    expect(results.slice(0, 9).every((result) => result.status === "fulfilled")).toBe(true);
    const last = results[9] as PromiseRejectedResult;
    expect(codeOf(last.reason)).toBe("invalid_input");
    for (const key of keys) {
      expect((await stores.claims.get(key))?.receipt).toEqual({
        status: "dispatched",
        settledAt: 2,
      });
    }
  });

  it("a batch of claims whose connection is cut in flight fails every caller closed; nothing lands", async () => {
    const test = await opened();
    const { stores, schema, applicationName } = test;
    const blocked = { session: "s", functionCallId: "blocked" };
    // An uncommitted insert of one batch key: the batch's insert waits on it, in flight.
    const holder = await holdLock(
      schema,
      "INSERT INTO $schema.claims (key, session_key, record, claimed_at) VALUES ($1, $2, '{}', 0)",
      [claimKeyDigest(blocked), storageDigest("s")],
    );
    const admin = new pg.Client({ connectionString: url as string });
    await admin.connect();
    try {
      const keys = [
        blocked,
        ...Array.from({ length: 31 }, (_, i) => ({ session: "s", functionCallId: `k${i}` })),
      ];
      const pending = Promise.allSettled(
        keys.map((key) => stores.claims.claim(key, record("cut"))),
      );
      await untilWaiting(admin, applicationName);
      test.proxy.interrupt();
      await terminateOwnBackends(url as string, applicationName);
      const results = await pending;
      for (const result of results) {
        expect(result.status).toBe("rejected");
        expect(codeOf((result as PromiseRejectedResult).reason)).toBe("claim_store_unavailable");
      }
      await holder.query("ROLLBACK");
      test.proxy.restore();
      await waitUntilAnswering(() => stores.claims.get(blocked));
      for (const key of keys) expect(await stores.claims.get(key)).toBeUndefined();
    } finally {
      await holder.end().catch(() => {});
      await admin.end();
    }
  });

  it("a batch of consumes whose connection is cut in flight fails every caller closed", async () => {
    const test = await opened();
    const { stores, schema, applicationName } = test;
    for (let g = 0; g < 4; g++) await stores.usage.tryConsume("ns", `g${g}`, 100);
    const holder = await holdLock(
      schema,
      "SELECT used FROM $schema.usage WHERE key = $1 FOR UPDATE",
      [storageDigest("ns", "g0")],
    );
    const admin = new pg.Client({ connectionString: url as string });
    await admin.connect();
    try {
      const pending = Promise.allSettled(
        Array.from({ length: 32 }, (_, i) => stores.usage.tryConsume("ns", `g${i % 4}`, 100)),
      );
      await untilWaiting(admin, applicationName);
      test.proxy.interrupt();
      await terminateOwnBackends(url as string, applicationName);
      for (const result of await pending) {
        expect(result.status).toBe("rejected");
        expect(codeOf((result as PromiseRejectedResult).reason)).toBe("usage_store_unavailable");
      }
      await holder.query("ROLLBACK");
      test.proxy.restore();
      await waitUntilAnswering(() => stores.usage.getUsage("ns", "g0"));
      for (let g = 0; g < 4; g++) expect(await stores.usage.getUsage("ns", `g${g}`)).toBe(1);
    } finally {
      await holder.end().catch(() => {});
      await admin.end();
    }
  });
});
