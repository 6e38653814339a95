/**
 * What an act costs the PostgreSQL server, beside what one raw claim INSERT costs it: CPU time
 * of every `postgres` process on this machine (backends, WAL writer, autovacuum), read from
 * `/proc` before and after a run of the same number of operations, per operation. The service
 * bench's allowed send is bound by the two cores it shares with the server; this row says how
 * much of that the server's side of an act takes, so a change to `record_acts` is judged by
 * its cost rather than by a throughput that moves with everything else on the machine.
 * Only where the server runs here (its processes readable in `/proc`); a note says otherwise.
 */
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { openStores, type StoreBundle } from "@tessera/core";
import pg from "pg";
import { concurrent } from "../measure.js";
import type { BenchRow } from "../report.js";
import { dropPostgresSchema } from "../scratch.js";
import { act } from "./acts.js";
import { RAW_SESSION_DIGEST, rawDigest, rawRecordJson } from "./raw-claim.js";

const OPS = 3_000;
const ROUNDS = 3;

/** Clock ticks (user + system) of every process named `postgres`; undefined when none runs here. */
function serverTicks(): number | undefined {
  let ticks = 0;
  let found = false;
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return undefined;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, "utf8");
    } catch {
      continue; // gone meanwhile, or not ours to read
    }
    const close = stat.lastIndexOf(")");
    if (stat.slice(stat.indexOf("(") + 1, close) !== "postgres") continue;
    // After the name come the fields from the 3rd (state) on: utime is the 14th, stime the 15th.
    const fields = stat.slice(close + 2).split(" ");
    ticks += Number(fields[11]) + Number(fields[12]);
    found = true;
  }
  return found ? ticks : undefined;
}

/** Linux reports these ticks at USER_HZ, 100 a second on every architecture it runs. */
const TICK_US = 10_000;

/** Server CPU µs per operation over `OPS` operations at `inFlight`, the least of `ROUNDS`. */
async function serverMicros(
  inFlight: number,
  task: (i: number) => Promise<unknown>,
  offset: { next: number },
): Promise<number> {
  let best = Number.POSITIVE_INFINITY;
  for (let round = 0; round < ROUNDS; round++) {
    const before = serverTicks() as number;
    const start = offset.next;
    offset.next += OPS;
    await concurrent(inFlight, OPS, (i) => task(start + i));
    const after = serverTicks() as number;
    best = Math.min(best, ((after - before) * TICK_US) / OPS);
  }
  return best;
}

export async function rows(): Promise<{ rows: BenchRow[]; notes: string[] }> {
  const base = process.env.TESSERA_PG_URL;
  if (!base) return { rows: [], notes: ["not measured: TESSERA_PG_URL not set"] };
  if (serverTicks() === undefined) {
    return { rows: [], notes: ["not measured: no PostgreSQL server process on this machine"] };
  }
  const schema = `tessera_bench_pgcpu_${process.pid}_${randomBytes(3).toString("hex")}`;
  const url = new URL(base);
  url.searchParams.set("schema", schema);
  url.searchParams.set("poolMax", "8");
  let stores: StoreBundle | undefined;
  const raw = new pg.Pool({ connectionString: base, max: 8 });
  try {
    stores = await openStores(url.toString());
    const opened = stores;
    const table = `"${schema}"."raw_claims"`;
    await raw.query(
      `CREATE TABLE ${table} (key text PRIMARY KEY, session_key text NOT NULL, record text NOT NULL, claimed_at bigint NOT NULL)`,
    );
    const insert = `INSERT INTO ${table} (key, session_key, record, claimed_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING RETURNING key`;
    const out: BenchRow[] = [];
    const offset = { next: 0 };
    for (const inFlight of [1, 16]) {
      const tag = `cpu${inFlight}`;
      const actUs = await serverMicros(inFlight, (i) => opened.acts.record(act(tag, i)), offset);
      const rawUs = await serverMicros(
        inFlight,
        (i) =>
          raw.query({
            name: "bench_raw_claim",
            text: insert,
            values: [
              rawDigest(tag, i),
              RAW_SESSION_DIGEST,
              rawRecordJson(tag, i, { bodyHash: "b".repeat(64), claimedAt: Date.now() }),
              Date.now(),
            ],
          }),
        offset,
      );
      out.push({
        name: `postgres server CPU per act (acts.record: claim + spend + event), c=${inFlight}`,
        unit: "µs",
        value: actUs,
        baseline: { name: "per raw claim INSERT (prepared), same pool size", value: rawUs },
        ratio: rawUs / actUs,
        ratioMeaning:
          "server CPU of one raw INSERT ÷ of one act (1 would be an act as cheap as one insert); least of 3 runs of 3,000",
      });
    }
    return { rows: out, notes: [] };
  } finally {
    await stores?.close();
    await raw.end();
    await dropPostgresSchema(base, schema).catch(() => undefined);
  }
}
