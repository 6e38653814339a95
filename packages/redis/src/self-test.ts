import { randomUUID } from "node:crypto";
import { TesseraError } from "@tessera/core";
import type { RedisClaimStore } from "./claim-store.js";
import type { Connection } from "./connection.js";
import type { RedisUsageStore } from "./usage-store.js";

/**
 * Proves, through the code that will serve, what the guarantees rest on: SET NX on a probe
 * claim answers "OK" then null, the claim carries a TTL (PTTL > 0, within the configured
 * one), and a bounded consume stops at its bound. A client, proxy or server that ignores NX
 * or PX (some Redis-compatible layers do) makes the store refuse to open: the gate must
 * never stand open on a set-if-absent that is not one. A server that may evict keys under
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
  try {
    const record = { bodyHash: "probe", claimedAt: Date.now() };
    const first = await claims.claim(key, record);
    const second = await claims.claim(key, record);
    if (first.status !== "claimed") failures.push("SET NX on a fresh probe key did not answer OK");
    if (second.status !== "already_claimed") failures.push("a second SET NX was not refused");
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
    await claims.endSession(probe);
    await connection.run("store_unavailable", (redis) => redis.del(usage.keyOf(probe, "probe")));
  }
  if (failures.length > 0) {
    throw new TesseraError(
      "store_self_test_failed",
      `Redis store refused to serve: ${failures.join("; ")}`,
    );
  }
}
