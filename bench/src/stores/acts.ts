/**
 * The act ledger beside the path it replaces, per backend, same store, same run: one act (the
 * claim of a call ID, one use of a bounded grant, the decision's audit event) recorded by the
 * bundle's `acts.record` — one transaction, acts in flight sharing one durable write — against
 * the same act composed of the older ports (`composeActLedger`: claim, then consume, then
 * append, each its own durable write). At 1 in flight (awaited one by one) and 64.
 * Every act is a committed write; each backend runs in its own file, schema or key prefix,
 * removed at the end.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { type Act, type AuditEvent, openStores, type StoreBundle } from "@tessera/core";
import { composeActLedger } from "@tessera/core/store-kit";
import type { BenchRow } from "../report.js";
import { deleteRedisPrefix, dropPostgresSchema } from "../scratch.js";
import { interleaved } from "./postgres.js";

const OPS = { 1: 1_600, 64: 6_400 } as const;
const MEANING =
  "acts.record ÷ the same act as claim + consume + append (old ports), same store, same run";

interface Backend {
  readonly name: string;
  readonly url: string;
  cleanup(): Promise<void>;
}

function backends(): Backend[] {
  const list: Backend[] = [];
  const dir = mkdtempSync(path.join(tmpdir(), "tessera-bench-acts-"));
  list.push({
    name: "sqlite",
    url: `sqlite:${path.join(dir, "acts.db")}`,
    cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  });
  const pgBase = process.env.TESSERA_PG_URL;
  if (pgBase) {
    const schema = `tessera_bench_acts_${process.pid}_${randomBytes(3).toString("hex")}`;
    const url = new URL(pgBase);
    url.searchParams.set("schema", schema);
    url.searchParams.set("poolMax", "8");
    list.push({
      name: "postgres",
      url: url.toString(),
      cleanup: () => dropPostgresSchema(pgBase, schema),
    });
  }
  const redisBase = process.env.TESSERA_REDIS_URL;
  if (redisBase) {
    const prefix = `tessera_bench_acts:${process.pid}:${randomBytes(3).toString("hex")}:`;
    const url = new URL(redisBase);
    url.searchParams.set("prefix", prefix);
    list.push({
      name: "redis",
      url: url.toString(),
      cleanup: () => deleteRedisPrefix(redisBase, prefix),
    });
  }
  return list;
}

function event(callId: string, denied: boolean): AuditEvent {
  return {
    at: new Date().toISOString(),
    source: "kernel",
    outcome: denied ? "denied" : "allowed",
    code: denied ? "tool_unavailable" : null,
    reason: denied ? "grant_exhausted" : "allowed",
    traceId: callId,
    callId,
    namespaceId: "bench",
    actor: "agent",
    authority: "issuer",
    grantId: "ticket",
    action: "messages.send",
    resource: "messages:/colleague",
  };
}

/** A retry-safe allowed send's act: a fresh call ID, one use of a grant that never runs out. */
export function act(tag: string, i: number): Act {
  const callId = `${tag}-${i}`;
  return {
    claim: {
      key: { session: "bench", functionCallId: callId },
      record: { bodyHash: "b".repeat(64), claimedAt: Date.now() },
    },
    spend: { namespaceId: "bench", grantId: `grant-${i % 100}`, maxUses: Number.MAX_SAFE_INTEGER },
    event: event(callId, false),
    exhausted: event(callId, true),
  };
}

async function measure(backend: Backend): Promise<BenchRow[]> {
  const stores: StoreBundle = await openStores(backend.url);
  try {
    const composed = composeActLedger(stores);
    const rows: BenchRow[] = [];
    for (const inFlight of [1, 64] as const) {
      const tag = `c${inFlight}`;
      const [ledger, old] = await interleaved(
        inFlight,
        OPS[inFlight],
        (i) => stores.acts.record(act(`${tag}-ledger`, i)),
        (i) => composed.record(act(`${tag}-composed`, i)),
      );
      rows.push({
        name: `${backend.name} acts.record/s (claim + spend + event), c=${inFlight}`,
        unit: "ops/s",
        value: ledger,
        baseline: { name: "claim, consume, append in turn (old ports)", value: old },
        ratio: ledger / old,
        ratioMeaning: MEANING,
      });
    }
    return rows;
  } finally {
    await stores.close();
  }
}

export async function rows(): Promise<{ rows: BenchRow[]; notes: string[] }> {
  const out: BenchRow[] = [];
  const notes: string[] = [];
  for (const backend of backends()) {
    try {
      out.push(...(await measure(backend)));
    } catch (error) {
      notes.push(`${backend.name}: FAILED, no figures: ${(error as Error).message}`);
    } finally {
      await backend.cleanup().catch(() => undefined);
    }
  }
  if (!process.env.TESSERA_PG_URL) notes.push("postgres not measured: TESSERA_PG_URL not set");
  if (!process.env.TESSERA_REDIS_URL) notes.push("redis not measured: TESSERA_REDIS_URL not set");
  return { rows: out, notes };
}
