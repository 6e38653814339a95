/**
 * Redis store throughput beside the raw primitive, same driver, same client options, same
 * server, same run:
 * - claims/s: `claims.claim` vs a bare `SET key value PX ttl NX` of one fresh key;
 * - bounded consumes/s: `usage.tryConsume` over 100 grants vs EVALSHA of the same bounded
 *   consume script on 100 counters;
 * at concurrency 1 (awaited one by one) and 8 (8 in flight on the one connection).
 * Runs under its own key prefix, deleted at the end.
 */
import { createHash, randomBytes } from "node:crypto";
import { openStores } from "@tessera/redis";
import { Redis } from "ioredis";
import { concurrent } from "../measure.js";
import type { BenchRow } from "../report.js";

const GRANTS = 100;
const TARGET = "overhead ≤ 1.3× (ratio ≥ 0.77)";
const RATIO_MEANING = "store ops/s ÷ raw primitive ops/s, same client options, same run";
const OPS = { 1: 1_000, 8: 4_000 } as const;
/** Short alternating rounds, best kept per side: the machine is shared and noisy. */
const ROUNDS = 4;
const TTL_MS = 7 * 24 * 3600 * 1000;

/** The store's bounded-consume script, text for text (packages/redis/src/usage-store.ts). */
const CONSUME = `
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
if used < tonumber(ARGV[1]) then
  return {1, redis.call('INCR', KEYS[1])}
end
return {0, used}
`;

type Concurrency = keyof typeof OPS;

function row(name: string, value: number, baselineName: string, baseline: number): BenchRow {
  const ratio = value / baseline;
  return {
    name,
    unit: "ops/s",
    value,
    baseline: { name: baselineName, value: baseline },
    ratio,
    ratioMeaning: RATIO_MEANING,
    target: TARGET,
    met: ratio >= 1 / 1.3,
  };
}

/** Store, raw, store, raw, …: each side keeps its best round. */
async function bestOfPairs(
  inFlight: Concurrency,
  store: (i: number) => Promise<unknown>,
  raw: (i: number) => Promise<unknown>,
): Promise<[number, number]> {
  let bestStore = 0;
  let bestRaw = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const base = round * 1_000_000;
    bestStore = Math.max(
      bestStore,
      (await concurrent(inFlight, OPS[inFlight], (i) => store(base + i))).opsPerSec,
    );
    bestRaw = Math.max(
      bestRaw,
      (await concurrent(inFlight, OPS[inFlight], (i) => raw(base + i))).opsPerSec,
    );
  }
  return [bestStore, bestRaw];
}

async function deletePrefix(redis: Redis, prefix: string): Promise<void> {
  let cursor = "0";
  do {
    const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000);
    cursor = next;
    if (keys.length > 0) await redis.unlink(...keys);
  } while (cursor !== "0");
}

export async function rows(): Promise<{ rows: BenchRow[]; notes: string[] }> {
  const base = process.env.TESSERA_REDIS_URL ?? "redis://127.0.0.1:6379";
  const prefix = `tessera_bench:${process.pid}:${randomBytes(3).toString("hex")}:`;
  const url = new URL(base);
  url.searchParams.set("prefix", prefix);
  let stores: Awaited<ReturnType<typeof openStores>>;
  try {
    stores = await openStores(url.toString());
  } catch (error) {
    return { rows: [], notes: [`not measured: Redis not reachable (${(error as Error).message})`] };
  }
  // The raw side: ioredis with the store's own client options.
  const raw = new Redis(base, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: 5_000,
  });
  try {
    await raw.connect();
    const sha = createHash("sha1").update(CONSUME).digest("hex");
    await raw.script("LOAD", CONSUME);
    const record = JSON.stringify({ bodyHash: "b".repeat(64), claimedAt: Date.now() });
    const claimRecord = { bodyHash: "b".repeat(64), claimedAt: Date.now() };
    const out: BenchRow[] = [];
    for (const inFlight of [1, 8] as const) {
      const tag = `c${inFlight}`;
      const [claimStore, claimRaw] = await bestOfPairs(
        inFlight,
        (i) =>
          stores.claims.claim({ session: "bench", functionCallId: `${tag}-${i}` }, claimRecord),
        (i) => raw.set(`${prefix}raw-claim:${tag}-${i}`, record, "PX", TTL_MS, "NX"),
      );
      out.push(row(`redis claims/s, c=${inFlight}`, claimStore, "SET NX PX", claimRaw));
      const [consumeStore, consumeRaw] = await bestOfPairs(
        inFlight,
        (i) => stores.usage.tryConsume("bench", `grant-${i % GRANTS}`, Number.MAX_SAFE_INTEGER),
        (i) => raw.evalsha(sha, 1, `${prefix}raw-usage:${i % GRANTS}`, Number.MAX_SAFE_INTEGER),
      );
      out.push(
        row(
          `redis bounded consumes/s, c=${inFlight}`,
          consumeStore,
          "EVALSHA consume script",
          consumeRaw,
        ),
      );
    }
    const info = await raw.info("persistence");
    const aof = /aof_enabled:(\d)/.exec(info)?.[1] === "1" ? "on" : "off";
    const server = /redis_version:([\d.]+)/.exec(await raw.info("server"))?.[1] ?? "?";
    return {
      rows: out,
      notes: [
        `Redis ${server}, AOF ${aof} on this server (the guarantee across a Redis restart needs AOF: see docs)`,
        `c=8 is 8 operations in flight on one connection; ${OPS[1]} (c=1) / ${OPS[8]} (c=8) operations per measurement, best of ${ROUNDS} rounds per side, store and raw alternated`,
        "a store claim is one EVALSHA whose script runs SET NX PX and writes the session and in-doubt indexes in the same atomic step; the raw primitive is the bare SET NX PX",
      ],
    };
  } finally {
    await stores.close();
    await deletePrefix(raw, prefix);
    raw.disconnect();
  }
}
