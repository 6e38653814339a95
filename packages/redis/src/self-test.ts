import { randomUUID } from "node:crypto";
import { TesseraError } from "@tessera/core";
import type { RedisClaimStore } from "./claim-store.js";
import type { Connection } from "./connection.js";
import type { RedisUsageStore } from "./usage-store.js";

/** `SET … NX GET` (claim and read the holder in one command) arrived in Redis 7.0. */
const MIN_MAJOR_VERSION = 7;

/**
 * Proves, through the code that will serve, what the guarantees rest on: a probe claim wins,
 * a second claim of the same key with a different record is refused and reports the first
 * record, the key still holds the first record (a SET that ignored NX would have overwritten
 * it), the claim carries a TTL (PTTL > 0, within the configured one), and a bounded consume
 * stops at its bound. A client, proxy or server that ignores NX or PX (some Redis-compatible
 * layers do) makes the store refuse to open: the gate must never stand open on a
 * set-if-absent that is not one. A server older than Redis 7.0 is refused up front. A server that may evict keys under
 * memory pressure (a `maxmemory` limit with any policy but `noeviction`) is refused too: an
 * evicted claim or counter would let a call run again or a spent ticket be spent again.
 * Probe keys are removed afterwards.
 */
export async function selfTest(
  connection: Connection,
  claims: RedisClaimStore,
  usage: RedisUsageStore,
  ttlMs: number,
): Promise<void> {
  const probe = `tessera-self-test-${randomUUID()}`;
  const key = { session: probe, functionCallId: "probe" };
  const failures: string[] = [];
  const server = await connection.run("store_unavailable", (redis) => redis.info("server"));
  const version = /^redis_version:(\d+)\./m.exec(server)?.[1];
  if (version === undefined || Number(version) < MIN_MAJOR_VERSION) {
    throw new TesseraError(
      "store_self_test_failed",
      `Redis store refused to serve: it needs Redis ${MIN_MAJOR_VERSION}.0 or later (SET NX GET); the server reports ${version ?? "no"} major version`,
    );
  }
  try {
    const first = await claims.claim(key, { bodyHash: "probe-first", claimedAt: Date.now() });
    const second = await claims.claim(key, { bodyHash: "probe-second", claimedAt: Date.now() });
    if (first.status !== "claimed") failures.push("a claim of a fresh probe key was not won");
    if (second.status !== "already_claimed" || second.existing.bodyHash !== "probe-first") {
      failures.push("a second SET NX was not refused with the first record");
    }
    if ((await claims.get(key))?.bodyHash !== "probe-first") {
      failures.push("a second SET NX overwrote the first record (NX ignored)");
    }
    const pttl = await connection.run("store_unavailable", (redis) =>
      redis.pttl(claims.keyOf(key)),
    );
    if (!(pttl > 0 && pttl <= ttlMs)) failures.push(`the claim's TTL is not set (PTTL ${pttl})`);

    const memory = await connection.run("store_unavailable", (redis) => redis.info("memory"));
    const maxmemory = Number(/^maxmemory:(\d+)/m.exec(memory)?.[1] ?? "0");
    const policy = /^maxmemory_policy:(\S+)/m.exec(memory)?.[1] ?? "noeviction";
    if (maxmemory > 0 && policy !== "noeviction") {
      failures.push(`maxmemory_policy is ${policy}: the server may evict claims and counters`);
    }

    const bound = 2;
    const outcomes = [];
    for (let i = 0; i < bound + 1; i++)
      outcomes.push(await usage.tryConsume(probe, "probe", bound));
    const consumed = outcomes.filter((outcome) => outcome.consumed).length;
    const used = await usage.getUsage(probe, "probe");
    if (consumed !== bound || used !== bound) {
      failures.push(`a bounded consume (max ${bound}) gave ${consumed} successes, count ${used}`);
    }
  } finally {
    // By name, not endSession: that walks the whole keyspace (SCAN), which on a shared server
    // holding millions of keys made every open take seconds and kept the server busy.
    await connection.run("store_unavailable", async (redis) => {
      // One DEL each: on a cluster the two keys need not share a slot.
      await redis.del(claims.keyOf(key));
      await redis.del(usage.keyOf(probe, "probe"));
    });
  }
  if (failures.length > 0) {
    throw new TesseraError(
      "store_self_test_failed",
      `Redis store refused to serve: ${failures.join("; ")}`,
    );
  }
}
