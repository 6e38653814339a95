/**
 * PostgreSQL store throughput beside the raw primitive, same driver, same pool settings,
 * same tables, same run:
 * - claims/s: `claims.claim` vs `INSERT … ON CONFLICT DO NOTHING RETURNING` of one fresh key;
 * - bounded consumes/s: `usage.tryConsume` over 100 grants vs the conditional
 *   `UPDATE … SET used = used + 1 WHERE key = $1 AND used < $2 RETURNING used` on 100 rows;
 * at concurrency 1 (awaited one by one) and 8 (8 in flight over a pool of 8 connections).
 * Every operation is a committed write. Runs in its own schema, dropped at the end.
 */
import { randomBytes } from "node:crypto";
import { openStores } from "@tessera/postgres";
import pg from "pg";
import { concurrent } from "../measure.js";
import type { BenchRow } from "../report.js";

const GRANTS = 100;
const TARGET = "overhead ≤ 1.3× (ratio ≥ 0.77)";
const RATIO_MEANING = "store ops/s ÷ raw primitive ops/s, same client and pool, same run";
const OPS = { 1: 300, 8: 1_000 } as const;
/** Short alternating rounds, best kept per side: the machine is shared and noisy. */
const ROUNDS = 4;

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

export async function rows(): Promise<{ rows: BenchRow[]; notes: string[] }> {
  const base = process.env.TESSERA_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";
  const schema = `tessera_bench_${process.pid}_${randomBytes(3).toString("hex")}`;
  const url = new URL(base);
  url.searchParams.set("schema", schema);
  url.searchParams.set("poolMax", "8");
  const admin = new pg.Pool({ connectionString: base, max: 1 });
  let stores: Awaited<ReturnType<typeof openStores>>;
  try {
    stores = await openStores(url.toString());
  } catch (error) {
    await admin.end();
    return {
      rows: [],
      notes: [`not measured: PostgreSQL not reachable (${(error as Error).message})`],
    };
  }
  // The raw side: the same driver with the store's pool settings, on the store's own tables.
  const raw = new pg.Pool({ connectionString: base, max: 8, statement_timeout: 5_000 });
  try {
    const claims = `"${schema}".claims`;
    const usage = `"${schema}".usage`;
    for (let g = 0; g < GRANTS; g++) {
      await raw.query(`INSERT INTO ${usage} (key, ids, used) VALUES ($1, '[]', 0)`, [`raw-${g}`]);
    }
    const record = { bodyHash: "b".repeat(64), claimedAt: Date.now(), worker: "bench" };
    const recordJson = JSON.stringify(record);
    const out: BenchRow[] = [];
    for (const inFlight of [1, 8] as const) {
      const tag = `c${inFlight}`;
      const [claimStore, claimRaw] = await bestOfPairs(
        inFlight,
        (i) => stores.claims.claim({ session: "bench", functionCallId: `${tag}-${i}` }, record),
        (i) =>
          raw.query(
            `INSERT INTO ${claims} (key, session_key, record, claimed_at) VALUES ($1, $2, $3, $4)
              ON CONFLICT DO NOTHING RETURNING key`,
            [`raw-${tag}-${i}`, "raw", recordJson, record.claimedAt],
          ),
      );
      out.push(
        row(
          `postgres claims/s, c=${inFlight}`,
          claimStore,
          "INSERT … ON CONFLICT DO NOTHING RETURNING",
          claimRaw,
        ),
      );
      const [consumeStore, consumeRaw] = await bestOfPairs(
        inFlight,
        (i) => stores.usage.tryConsume("bench", `grant-${i % GRANTS}`, Number.MAX_SAFE_INTEGER),
        (i) =>
          raw.query(
            `UPDATE ${usage} SET used = used + 1 WHERE key = $1 AND used < $2 RETURNING used`,
            [`raw-${i % GRANTS}`, Number.MAX_SAFE_INTEGER],
          ),
      );
      out.push(
        row(
          `postgres bounded consumes/s, c=${inFlight}`,
          consumeStore,
          "UPDATE … WHERE used < max RETURNING",
          consumeRaw,
        ),
      );
    }
    const server = await raw.query<{ version: string; sync: string }>(
      "SELECT current_setting('server_version') AS version, current_setting('synchronous_commit') AS sync",
    );
    return {
      rows: out,
      notes: [
        `PostgreSQL ${server.rows[0]?.version}, synchronous_commit=${server.rows[0]?.sync}; every operation is its own committed transaction`,
        `c=8 is 8 operations in flight over a pool of 8 connections in one process; ${OPS[1]} (c=1) / ${OPS[8]} (c=8) operations per measurement, best of ${ROUNDS} rounds per side, store and raw alternated`,
        "the store's consume is the same conditional UPDATE once the counter row exists (a guarded INSERT … ON CONFLICT DO UPDATE creates it on first use); claims add a SHA-256 key digest and a JSON record per call",
      ],
    };
  } finally {
    await stores.close();
    await raw.end();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  }
}
