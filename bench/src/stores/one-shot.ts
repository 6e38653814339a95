/**
 * Issue 14: a one-shot decision (open a turn, decide, close) on a durable grant store holding
 * 10,000 grants for the holder, beside one raw point read on the same database plus the same
 * decision on an already open turn. A warm kernel opens the turn on one grants-version read
 * (the grant set validated and indexed once, reused while the version stands), so the two
 * should differ by the kernel's own bookkeeping only. Grants are unbounded (the usage store
 * is not asked) and no audit sink is installed: this row measures the opening. The same
 * opening with the turn cache off is shown for scale.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  createKernel,
  type GrantInput,
  type GrantStore,
  type KernelOptions,
  messageSendCapability,
  openStores,
} from "@tessera/core";
import Database from "better-sqlite3";
import pg from "pg";
import { medianRatesAbba, throughput } from "../measure.js";
import { type BenchRow, ratioRow } from "../report.js";

const HELD = 10_000;
const ROUNDS = 8;
const TARGET = { text: "within 1.5× (ratio ≥ 0.67)", minRatio: 1 / 1.5 };
const MEANING = "one-shot decisions/s ÷ (raw point read + decision)/s, same database, same run";
const CTX = {
  namespaceId: "bench",
  actor: "asker",
  authority: "host",
  owner: "alice",
  traceId: "bench-trace",
} as const;
const REQUEST = {
  action: "messages.send",
  resource: { namespace: "messages", path: [`colleague-${HELD - 1}`], owner: "alice" },
};

function tickets(): GrantInput[] {
  return Array.from({ length: HELD }, (_, i) => ({
    id: `grant-${i}`,
    namespaceId: CTX.namespaceId,
    issuer: CTX.authority,
    subject: CTX.actor,
    capabilities: [messageSendCapability(`colleague-${i}`, CTX.owner)],
    issuedAt: "2026-01-01T00:00:00.000Z",
  }));
}

function kernelOver(grants: GrantStore, options: Partial<KernelOptions> = {}) {
  const kernel = createKernel({ grants, ...options });
  return async () => {
    const turn = await kernel.openTurnAuthority(CTX);
    const result = await turn.authorize(REQUEST);
    await turn.close();
    if (result.status !== "allowed") throw new Error("bench: the one-shot decision was refused");
  };
}

function rate(op: () => Promise<unknown>, minMs: number, warmupMs: number): Promise<number> {
  return throughput(op, 1, { minMs, warmupMs, rounds: 1 }).then((t) => t.opsPerSec);
}

/** Ours and the baseline in alternating slices (ABBA), median rate per side; then cold. */
async function measure(
  backend: string,
  grants: GrantStore,
  rawRead: () => Promise<unknown> | unknown,
): Promise<BenchRow[]> {
  const ours = kernelOver(grants);
  const open = await createKernel({ grants }).openTurnAuthority(CTX);
  const baseline = async () => {
    await rawRead();
    const result = await open.authorize(REQUEST);
    if (result.status !== "allowed") throw new Error("bench: the decision was refused");
  };
  await ours();
  await baseline();
  const [value, base] = await medianRatesAbba(
    ROUNDS,
    (round) => rate(ours, 200, round < 2 ? 100 : 0),
    (round) => rate(baseline, 200, round < 2 ? 100 : 0),
  );
  await open.close();
  const cold = await rate(kernelOver(grants, { turnCache: false }), 1_000, 0);
  return [
    ratioRow(
      `${backend} one-shot decision (open turn, decide, close), ${HELD.toLocaleString("en-US")} grants held`,
      value,
      { name: "raw point read + the decision", value: base },
      MEANING,
      TARGET,
    ),
    {
      name: `  ${backend}: the same with turnCache: false (each turn reads, validates and indexes ${HELD.toLocaleString("en-US")})`,
      unit: "ops/s",
      value: cold,
    },
  ];
}

async function sqliteRows(): Promise<BenchRow[]> {
  const dir = mkdtempSync(join(tmpdir(), "tessera-bench-one-shot-"));
  const path = join(dir, "grants.db");
  const stores = await openStores(`sqlite:${path}`);
  const raw = new Database(path);
  try {
    if (stores.grants.addMany === undefined) throw new Error("bench: no addMany");
    await stores.grants.addMany(tickets());
    const read = raw.prepare(
      "SELECT salt, bumps FROM tessera_grant_versions WHERE namespace_id = ? AND subject = ?",
    );
    return await measure("sqlite", stores.grants, () => read.get(CTX.namespaceId, CTX.actor));
  } finally {
    raw.close();
    await stores.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function postgresRows(): Promise<BenchRow[]> {
  const base = process.env.TESSERA_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";
  const schema = `tessera_bench_${process.pid}_${randomBytes(3).toString("hex")}`;
  const url = new URL(base);
  url.searchParams.set("schema", schema);
  url.searchParams.set("poolMax", "8");
  const admin = new pg.Pool({ connectionString: base, max: 1 });
  const stores = await openStores(url.toString());
  const raw = new pg.Pool({ connectionString: base, max: 8 });
  try {
    if (stores.grants.addMany === undefined) throw new Error("bench: no addMany");
    await stores.grants.addMany(tickets());
    const versions = `"${schema}"."grant_versions"`;
    const keys = await raw.query<{ n: string; s: string }>(
      `SELECT namespace_key AS n, subject_key AS s FROM ${versions}`,
    );
    const key = keys.rows[0];
    if (keys.rows.length !== 1 || key === undefined) throw new Error("bench: one holder expected");
    const sql = `SELECT salt, bumps FROM ${versions} WHERE namespace_key = $1 AND subject_key = $2`;
    return await measure("postgres", stores.grants, () => raw.query(sql, [key.n, key.s]));
  } finally {
    await stores.close();
    await raw.end();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  }
}

export async function rows(): Promise<{ rows: BenchRow[]; notes: string[] }> {
  const out: BenchRow[] = [];
  const notes = [
    "one-shot rows: 10,000 unbounded grants held (added with addMany), no audit sink, a kernel that has opened the holder's turn before; the baseline is one raw point read (the holder's version row, with the driver) plus the decision on a turn already open",
  ];
  out.push(...(await sqliteRows()));
  try {
    out.push(...(await postgresRows()));
  } catch (error) {
    notes.push(`postgres one-shot: FAILED, no figures: ${(error as Error).message}`);
  }
  return { rows: out, notes };
}
