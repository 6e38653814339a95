/**
 * Redis store throughput beside the raw primitive, same driver, same client options, same
 * server, same run:
 * - claims/s: `claims.claim` vs a bare `SET key value PX ttl NX` of one fresh key, as long
 *   as the store's, holding the same record;
 * - bounded consumes/s: `usage.tryConsume` over 100 grants vs EVALSHA of the same bounded
 *   consume script on 100 counters;
 * at concurrency 1 (awaited one by one) and 8 (8 in flight on the one connection).
 * Runs under its own key prefix, deleted at the end.
 */
import { createHash, randomBytes } from "node:crypto";
import { openStores, type StoreBundle } from "@tessera/core";
import { Redis } from "ioredis";
import { type BenchRow, ratioRow } from "../report.js";
import { deletePrefix } from "../scratch.js";
import { endToEndRows, interleaved, SLICES } from "./postgres.js";
import { RAW_SESSION_DIGEST, rawDigest, rawRecordJson } from "./raw-claim.js";

const GRANTS = 100;
const TARGET = "overhead ≤ 1.3× (ratio ≥ 0.77)";
const RATIO_MEANING = "store ops/s ÷ raw primitive ops/s, same client options, same run";
/** Per measurement: at c=8 a slice of 40,000 / SLICES still lasts tens of milliseconds. */
const OPS = { 1: 4_000, 8: 40_000 } as const;

const TTL_MS = 7 * 24 * 3600 * 1000;

/** The store's bounded-consume script, text for text (packages/redis/src/usage-store.ts). */
const CONSUME = `
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
if used < tonumber(ARGV[1]) then
  return {1, redis.call('INCR', KEYS[1])}
end
return {0, used}
`;

function row(name: string, value: number, baselineName: string, baseline: number): BenchRow {
  return ratioRow(name, value, { name: baselineName, value: baseline }, RATIO_MEANING, {
    text: TARGET,
    minRatio: 1 / 1.3,
  });
}

export async function rows(): Promise<{ rows: BenchRow[]; notes: string[] }> {
  const base = process.env.TESSERA_REDIS_URL ?? "redis://127.0.0.1:6379";
  const prefix = `tessera_bench:${process.pid}:${randomBytes(3).toString("hex")}:`;
  const url = new URL(base);
  url.searchParams.set("prefix", prefix);
  let stores: StoreBundle;
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
    const claimRecord = { bodyHash: "b".repeat(64), claimedAt: Date.now() };
    // The raw side writes what a claim writes: a key as long (prefix, kind, two digests)
    // and the same record.
    const rawKey = (kind: string, tag: string, i: number) =>
      `${prefix}${kind}:${RAW_SESSION_DIGEST}:${rawDigest(tag, i)}`;
    const rawRecord = (tag: string, i: number) => rawRecordJson(tag, i, claimRecord);
    const out: BenchRow[] = [];
    for (const inFlight of [1, 8] as const) {
      const tag = `c${inFlight}`;
      const [claimStore, claimRaw] = await interleaved(
        inFlight,
        OPS[inFlight],
        (i) =>
          stores.claims.claim({ session: "bench", functionCallId: `${tag}-${i}` }, claimRecord),
        (i) => raw.set(rawKey("rawclm", tag, i), rawRecord(tag, i), "PX", TTL_MS, "NX"),
      );
      out.push(row(`redis claims/s, c=${inFlight}`, claimStore, "SET NX PX", claimRaw));
      // The store's own command sent raw: what is left is the client-side cost of the store
      // (validation, key digests, the record's JSON, the reply check).
      const [claimStoreAgain, claimGetRaw] = await interleaved(
        inFlight,
        OPS[inFlight],
        (i) =>
          stores.claims.claim({ session: "bench2", functionCallId: `${tag}-${i}` }, claimRecord),
        (i) => raw.set(rawKey("rawget", tag, i), rawRecord(tag, i), "PX", TTL_MS, "NX", "GET"),
      );
      out.push({
        ...row(
          `redis claims/s, c=${inFlight}, vs its own command`,
          claimStoreAgain,
          "SET NX PX GET",
          claimGetRaw,
        ),
        target: undefined,
        met: undefined,
        ratioMeaning:
          "store ops/s ÷ the store's own command sent raw (informational: the client-side share of the overhead)",
      });
      const [consumeStore, consumeRaw] = await interleaved(
        inFlight,
        OPS[inFlight],
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
    out.push(
      ...(await endToEndRows(
        "redis",
        stores.claims,
        stores.usage,
        (i) => raw.set(rawKey("rawclm", "e2e", i), rawRecord("e2e", i), "PX", TTL_MS, "NX"),
        (i) => raw.evalsha(sha, 1, `${prefix}raw-usage:${i % GRANTS}`, Number.MAX_SAFE_INTEGER),
        OPS[1],
      )),
    );
    const info = await raw.info("persistence");
    const aof = /aof_enabled:(\d)/.exec(info)?.[1] === "1" ? "on" : "off";
    const server = /redis_version:([\d.]+)/.exec(await raw.info("server"))?.[1] ?? "?";
    return {
      rows: out,
      notes: [
        `Redis ${server}, AOF ${aof} on this server (the guarantee across a Redis restart needs AOF: see docs)`,
        `c=8 is 8 operations in flight on one connection; ${OPS[1]} (c=1) / ${OPS[8]} (c=8) operations per measurement, store and raw alternated in ${SLICES} slices (ABBA, after one warm-up slice each), median slice rate per side`,
        "a store claim alone in its tick is one SET key record NX PX ttl GET (it reads the holder's record in the same step); claims issued in one tick leave as one script running that SET per key; the raw primitive is the bare SET NX PX of a key of the same length and the same record JSON, each sent as issued",
      ],
    };
  } finally {
    await stores.close();
    await deletePrefix(raw, prefix);
    raw.disconnect();
  }
}
