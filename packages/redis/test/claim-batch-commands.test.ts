/**
 * Claims issued in one tick at the driver: they leave as one `CLAIM` script (counted where
 * ioredis writes), a claim alone as the plain `SET … NX GET`, and each caller still gets its
 * own answer: a key given twice in one batch is claimed once, the second caller reading the
 * first's record; a key the server refuses fails only its own claim; a batch cut off by the
 * test's TCP proxy fails every claim of it closed; what a tick queued still leaves when the
 * bundle closes in that tick.
 */
import type { ClaimKey, ClaimResult } from "@tessera/core";
import { serviceUrl } from "@tessera/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { RedisClaimStore } from "../src/claim-store.js";
import {
  admin,
  openOwnLedger,
  openTestStores,
  waitUntilAnswering,
} from "./support/redis-test-stores.js";

const url = serviceUrl("TESSERA_REDIS_URL");
const suite = url ? describe : describe.skip;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

/**
 * A claim store on a connection of its own (through the test's proxy, so an outage cuts it),
 * whose commands the test counts.
 */
async function open() {
  const opened = await openTestStores(url as string);
  cleanups.push(opened.close);
  const { connection } = await openOwnLedger(opened);
  cleanups.push(() => connection.close());
  return { opened, claims: new RedisClaimStore(connection, 60_000), connection };
}

const key = (id: string): ClaimKey => ({ session: "one-tick", functionCallId: id });

suite("redis claims in one tick: one command", () => {
  it("several claims in one tick are one EVALSHA; a claim alone is one SET", async () => {
    const { claims, connection } = await open();
    // Load the script once (a server that does not know it answers NOSCRIPT, then EVAL).
    await Promise.all([claims.claim(key("w1"), rec(1)), claims.claim(key("w2"), rec(1))]);

    connection.sent.reset();
    const results = await Promise.all(
      Array.from({ length: 5 }, (_, i) => claims.claim(key(`c${i}`), rec(i))),
    );
    expect(results).toEqual(Array.from({ length: 5 }, () => ({ status: "claimed" })));
    expect(connection.sent.snapshot()).toEqual({ evalsha: 1 });

    connection.sent.reset();
    expect(await claims.claim(key("alone"), rec(9))).toEqual({ status: "claimed" });
    expect(connection.sent.snapshot()).toEqual({ set: 1 });

    // Each batch is bounded: 600 claims at once are three scripts.
    connection.sent.reset();
    const many = await Promise.all(
      Array.from({ length: 600 }, (_, i) => claims.claim(key(`m${i}`), rec(i))),
    );
    expect(many.every((r) => r.status === "claimed")).toBe(true);
    expect(connection.sent.snapshot()).toEqual({ evalsha: 3 });
  });

  it("a key twice in one batch: claimed once, the other caller reads the first's record", async () => {
    const { claims, connection } = await open();
    connection.sent.reset();
    const results = await Promise.all([
      claims.claim(key("dup"), rec(1, "first")),
      claims.claim(key("other"), rec(2)),
      claims.claim(key("dup"), rec(3, "second")),
    ]);
    expect(connection.sent.of("evalsha") + connection.sent.of("eval")).toBe(1);
    expect(connection.sent.of("set")).toBe(0);
    expect(results[0]).toEqual({ status: "claimed" });
    expect(results[1]).toEqual({ status: "claimed" });
    expect(results[2]).toEqual({
      status: "already_claimed",
      existing: {
        session: "one-tick",
        functionCallId: "dup",
        bodyHash: "first",
        claimedAt: 1,
      },
    });
    expect(await claims.get(key("dup"))).toMatchObject({ bodyHash: "first" });
  });

  it("a key the server refuses (WRONGTYPE) fails its own claim closed, not its neighbours", async () => {
    const { claims } = await open();
    await admin(url as string, (redis) => redis.hset(claims.keyOf(key("hash")), "f", "v"));
    const results = await Promise.allSettled([
      claims.claim(key("before"), rec(1)),
      claims.claim(key("hash"), rec(2)),
      claims.claim(key("after"), rec(3)),
    ]);
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect((results[1] as PromiseRejectedResult).reason).toMatchObject({
      code: "claim_store_unavailable",
    });
    expect(await claims.get(key("after"))).toMatchObject({ bodyHash: "h3" });
  });

  it("a batch cut off in flight fails every claim of it with claim_store_unavailable", async () => {
    const { opened, claims, connection } = await open();
    // Load the script, so the batch below is exactly one EVALSHA.
    await Promise.all([claims.claim(key("w1"), rec(1)), claims.claim(key("w2"), rec(1))]);
    connection.sent.reset();
    const pending = Array.from({ length: 6 }, (_, i) => claims.claim(key(`cut${i}`), rec(i)));
    // The batch leaves on the next tick; cut the connection right after it is written.
    await new Promise<void>((resolve) => process.nextTick(resolve));
    expect(connection.sent.snapshot()).toEqual({ evalsha: 1 });
    opened.proxy.interrupt();
    const results = await Promise.allSettled(pending);
    for (const result of results) {
      expect(result.status).toBe("rejected");
      expect((result as PromiseRejectedResult).reason).toMatchObject({
        code: "claim_store_unavailable",
      });
    }
    opened.proxy.restore();
    await waitUntilAnswering(() => claims.get(key("probe")));
    // After recovery each key is decided: claimed now, or held by the batch's own record.
    const retries: ClaimResult[] = await Promise.all(
      Array.from({ length: 6 }, (_, i) => claims.claim(key(`cut${i}`), rec(i))),
    );
    retries.forEach((retry, i) => {
      if (retry.status === "already_claimed") expect(retry.existing.bodyHash).toBe(`h${i}`);
      else expect(retry).toEqual({ status: "claimed" });
    });
  });

  it("claims and settles issued just before the bundle closes are still sent and answered", async () => {
    const opened = await openTestStores(url as string);
    cleanups.push(opened.close);
    const { claims } = opened.stores;
    await claims.claim(key("to-settle"), rec(1));
    const pending = [
      claims.claim(key("last-a"), rec(2)),
      claims.claim(key("last-b"), rec(3)),
      claims.claim(key("last-c"), rec(4)),
    ];
    const settled = claims.settle(key("to-settle"), { status: "dispatched", settledAt: 5 });
    await opened.stores.close();
    expect(await Promise.all(pending)).toEqual([
      { status: "claimed" },
      { status: "claimed" },
      { status: "claimed" },
    ]);
    await settled;
  });
});

function rec(claimedAt: number, bodyHash = `h${claimedAt}`) {
  return { bodyHash, claimedAt };
}
