import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  countPostgresStatements,
  countRedisCommands,
  countSqliteCommits,
  type DriverCounter,
} from "@tessera/testkit/round-trips";
import BetterSqlite3 from "better-sqlite3";
import { Redis } from "ioredis";
import pg from "pg";
import type { BenchRow, BenchSection } from "../report.js";
import { deleteRedisPrefix, dropPostgresSchema } from "../scratch.js";
import { countMcp } from "./mcp.js";
import { type Counted, countService } from "./service.js";

/**
 * Issue 22's exact figures: durable round trips before the reply, per act, counted at the
 * driver (SQLite commits, PostgreSQL statements that write, Redis scripts and write commands;
 * `@tessera/testkit`'s counters, the ones the round-trip tests assert with) when each reply is
 * handed over. Counts, not rates: the same on any machine, so each row's target is checked
 * exactly.
 */

const ACTS = 20;

interface Backend {
  readonly name: "sqlite" | "postgres" | "redis";
  readonly counter: () => DriverCounter;
  /** The store URL of one measurement (`part` names it), or undefined when not set up. */
  readonly url: (part: string) => string | undefined;
}

function backends(run: string, dir: string): Backend[] {
  const pgUrl = process.env.TESSERA_PG_URL;
  const redisUrl = process.env.TESSERA_REDIS_URL;
  return [
    {
      name: "sqlite",
      counter: () => countSqliteCommits(BetterSqlite3),
      url: (part) => `sqlite:${join(dir, `${part}.db`)}`,
    },
    {
      name: "postgres",
      counter: () => countPostgresStatements(pg.Client),
      url: (part) => (pgUrl ? `${pgUrl}?schema=${run}_${part}` : undefined),
    },
    {
      name: "redis",
      counter: () => countRedisCommands(Redis),
      url: (part) => (redisUrl ? `${redisUrl}?prefix=${run}:${part}:` : undefined),
    },
  ];
}

/** One row: the writes per act, with its target (`most` writes per act) checked exactly. */
function countRow(name: string, counted: Counted, expected: string, most: number): BenchRow {
  const perAct = counted.writes / counted.acts;
  // An answer other than the one the row names means it counted another act: not met.
  const other = counted.answers.find((answer) => answer !== expected);
  const measured = other === undefined;
  return {
    name: `${name}: ${counted.acts} acts, ${(counted.total / counted.acts).toFixed(2)} statements/act${measured ? "" : `; NOT that act, one answered ${other}`}`,
    unit: "writes/act",
    value: perAct,
    target: most === 0 ? "0 before the reply" : `≤ ${most.toFixed(1)} before the reply`,
    met: measured && perAct <= most,
  };
}

async function measure(backend: Backend, rows: BenchRow[], notes: string[]): Promise<void> {
  const serviceUrl = backend.url("serve");
  const mcpUrl = backend.url("mcp");
  if (serviceUrl === undefined || mcpUrl === undefined) {
    notes.push(
      `${backend.name}: its service URL is not set (TESSERA_PG_URL / TESSERA_REDIS_URL): no row`,
    );
    return;
  }
  // Installed before the stores open: a Redis connection binds its driver's method when made.
  const counter = backend.counter();
  try {
    const service = await countService(serviceUrl, counter, ACTS);
    const mcp = await countMcp(mcpUrl, counter, ACTS);
    const at = `(${backend.name})`;
    rows.push(
      countRow(`service retry-safe send, allowed ${at}`, service.allowed, "delivered", 1),
      countRow(`service retry-safe send, denied ${at}`, service.denied, "denied", 1),
      countRow(`service send denied, no call ID ${at}`, service.deniedWithoutCallId, "denied", 0),
      countRow(`service A2UI claim, allowed ${at}`, service.a2uiClaim, "claimed", 1),
      countRow(`service A2UI settle of that claim ${at}`, service.a2uiSettle, "dispatched", 0),
      countRow(`mcp tools/call, allowed ${at}`, mcp.allowed, "allowed", 1),
      countRow(`mcp tools/call, refused ${at}`, mcp.refused, "refused", 1),
    );
  } catch (error) {
    notes.push(`${backend.name}: FAILED, no figures: ${(error as Error).message}`);
  } finally {
    counter.stop();
  }
}

export async function run(): Promise<BenchSection> {
  const rows: BenchRow[] = [];
  const notes: string[] = [];
  const run = `rt_${randomBytes(5).toString("hex")}`;
  const dir = mkdtempSync(join(tmpdir(), "tessera-round-trips-"));
  try {
    for (const backend of backends(run, dir)) await measure(backend, rows, notes);
  } finally {
    rmSync(dir, { recursive: true, force: true });
    // The audit trail never expires: without this every run would leave its keys and schemas.
    const pgUrl = process.env.TESSERA_PG_URL;
    const redisUrl = process.env.TESSERA_REDIS_URL;
    for (const part of ["serve", "mcp"]) {
      if (pgUrl) await dropPostgresSchema(pgUrl, `${run}_${part}`).catch(() => undefined);
    }
    if (redisUrl) await deleteRedisPrefix(redisUrl, `${run}:`).catch(() => undefined);
  }
  notes.push(
    `each act sent alone, after the writes of the ones before it landed (the service's drain; for MCP, 60 ms), with the principal's grant set read first; the counter read when the reply is handed over (Fastify's onSend; the gateway's transport send)`,
    "a write: a SQLite commit, a PostgreSQL statement that writes, a Redis script or write command; statements/act: everything the driver was sent before the reply, reads included (PostgreSQL, Redis), or every statement run (SQLite: BEGIN, the act's rows and COMMIT of its one transaction; its reads are local calls and not counted)",
    "a refusal reads twice before its reply on PostgreSQL and Redis, and writes nothing more: the grant set's version (a refusal is never decided on grants taken from the cache on trust) and the use count of the caller's bounded grant (whether the tool is still offered decides the refusal's code)",
    "the A2UI settle writes its receipt and answer after its reply; a denial without a call ID writes its event after its reply, in the store's next write",
  );
  return { name: "roundtrips", rows, notes };
}
