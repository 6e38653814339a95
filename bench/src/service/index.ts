/**
 * The service over loopback HTTP (autocannon), beside what it is built on, in one run:
 * - the denied send (`POST /v1/messages` to a recipient nobody holds a ticket for) beside a bare
 *   Fastify route that parses the same JSON body and answers a JSON body of the same size;
 * - the allowed, retry-safe send (a fresh `callId` per request, a bounded ticket spent) over
 *   SQLite and PostgreSQL, beside the store's raw single-write primitive (one committed claim
 *   row: `INSERT OR IGNORE` / `INSERT … ON CONFLICT DO NOTHING`) over the same database;
 * - A2UI claim + settle (two requests per call), beside the same primitive (informational).
 * Every pair runs in alternating slices (ABBA), the median slice kept per side.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InMemoryClaimStore } from "@tessera/a2ui";
import {
  InMemoryAuditSink,
  InMemoryGrantStore,
  InMemoryGrantUsageStore,
  InProcessTransport,
  messageSendCapability,
  openStores,
} from "@tessera/core";
import { listen, type ServiceStores, tokenDigest } from "@tessera/server";
import Database from "better-sqlite3";
import Fastify from "fastify";
import pg from "pg";
import { CATALOG, CATALOG_ID } from "../a2ui/fixtures.js";
import { medianRatesAbba, throughput } from "../measure.js";
import { type BenchRow, type BenchSection, ratioRow } from "../report.js";
import { RAW_SESSION_DIGEST, rawDigest, rawRecordJson } from "../stores/raw-claim.js";
import { type Load, load } from "./load.js";

const TOKEN = "bench-service-token";
const PRINCIPAL = {
  tokenSha256: tokenDigest(TOKEN),
  namespaceId: "bench",
  actor: "asker",
  authority: "host",
  owner: "alice",
};
/** Alternating slices per side, and the length of one slice. */
const ROUNDS = 4;
const SLICE_MS = 700;
/** Requests in flight: one, so the HTTP rows and the raw primitive are both sequential. */
const CONNECTIONS = 1;

interface Running {
  readonly url: string;
  close(): Promise<void>;
}

/** Every port in memory: the service's HTTP and kernel work with no durable write. */
function memoryStores(): ServiceStores & { close(): Promise<void> } {
  return {
    grants: new InMemoryGrantStore(),
    usage: new InMemoryGrantUsageStore(),
    audit: new InMemoryAuditSink(),
    claims: new InMemoryClaimStore(),
    close: async () => undefined,
  };
}

/** The service over `storeUrl` (or memory), holding one bounded ticket for `colleague`. */
async function service(storeUrl: string | "memory"): Promise<Running> {
  const stores = storeUrl === "memory" ? memoryStores() : await openStores(storeUrl);
  await stores.grants.add({
    id: `bench-ticket-${randomBytes(4).toString("hex")}`,
    namespaceId: "bench",
    issuer: "host",
    subject: "asker",
    capabilities: [messageSendCapability("colleague", "alice")],
    constraints: { maxUses: Number.MAX_SAFE_INTEGER },
    issuedAt: new Date(Date.now() - 60_000).toISOString(),
  });
  const server = await listen({
    stores,
    principals: [PRINCIPAL],
    transport: InProcessTransport.echo(),
    a2ui: { catalogs: [CATALOG] },
    port: 0,
    log: false,
  });
  return {
    url: server.url,
    close: async () => {
      await server.close();
      await stores.close();
    },
  };
}

/** A bare Fastify route: parses the JSON body, answers `size` bytes of JSON. */
async function bareRoute(size: number): Promise<Running> {
  const app = Fastify({ logger: false });
  const pad = "x".repeat(Math.max(0, size - '{"status":"denied","pad":""}'.length));
  app.post("/v1/messages", async () => ({ status: "denied", pad }));
  await app.listen({ host: "127.0.0.1", port: 0 });
  const { port } = app.server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, close: () => app.close() };
}

const auth = { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" };

function deniedSend(url: string): Load {
  return {
    url,
    requests: [
      {
        method: "POST",
        path: "/v1/messages",
        headers: auth,
        body: JSON.stringify({ recipient: "stranger", payload: "hi" }),
      },
    ],
  };
}

function allowedSend(url: string, tag: string): Load {
  let n = 0;
  return {
    url,
    requests: [
      {
        method: "POST",
        path: "/v1/messages",
        headers: auth,
        setupRequest: (request) => ({
          ...request,
          body: JSON.stringify({ recipient: "colleague", payload: "hi", callId: `${tag}-${n++}` }),
        }),
      },
    ],
  };
}

function a2uiClaimSettle(url: string, tag: string): Load {
  let n = 0;
  return {
    url,
    requests: [
      {
        method: "POST",
        path: "/v1/a2ui/claim",
        headers: auth,
        setupRequest: (request) => ({
          ...request,
          body: JSON.stringify({
            message: {
              version: "v1.0",
              callRendererFunction: {
                functionCallId: `${tag}-${n++}`,
                callFunction: { call: "add", catalogId: CATALOG_ID, args: { a: 1, b: 2 } },
              },
            },
          }),
        }),
        onResponse: (_status, body, context) => {
          context.handle = (JSON.parse(body) as { handle?: string }).handle;
        },
      },
      {
        method: "POST",
        path: "/v1/a2ui/settle",
        headers: auth,
        setupRequest: (request, context) => ({
          ...request,
          body: JSON.stringify({ handle: context.handle, value: 3 }),
        }),
      },
    ],
  };
}

/** One committed claim row per call, written by the driver alone. */
interface RawPrimitive {
  readonly name: string;
  write(i: number): unknown;
  close(): Promise<void>;
}

function rawSqlite(path: string): RawPrimitive {
  const db = new Database(path);
  db.pragma("busy_timeout = 5000");
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = FULL");
  db.exec(`CREATE TABLE IF NOT EXISTS raw_claims (
    session TEXT NOT NULL, call_id TEXT NOT NULL, record TEXT NOT NULL,
    claimed_at INTEGER NOT NULL, PRIMARY KEY (session, call_id)) WITHOUT ROWID`);
  const insert = db.prepare(
    "INSERT OR IGNORE INTO raw_claims (session, call_id, record, claimed_at) VALUES (?, ?, ?, ?)",
  );
  const record = { bodyHash: "b".repeat(64), claimedAt: Date.now() };
  return {
    name: "INSERT OR IGNORE of one claim row (synchronous=FULL)",
    write: (i) =>
      insert.run(RAW_SESSION_DIGEST, rawDigest("s", i), rawRecordJson("s", i, record), i),
    close: async () => {
      db.close();
    },
  };
}

function rawPostgres(base: string, schema: string): RawPrimitive {
  const pool = new pg.Pool({ connectionString: base, max: 1 });
  const record = { bodyHash: "b".repeat(64), claimedAt: Date.now() };
  return {
    name: "INSERT … ON CONFLICT DO NOTHING RETURNING of one claim row",
    write: (i) =>
      pool.query(
        `INSERT INTO "${schema}".claims (key, session_key, record, claimed_at) VALUES ($1, $2, $3, $4)
          ON CONFLICT DO NOTHING RETURNING key`,
        [rawDigest("p", i), RAW_SESSION_DIGEST, rawRecordJson("p", i, record), record.claimedAt],
      ),
    close: () => pool.end(),
  };
}

/** `ours` (an HTTP load) against `theirs`, alternating; latencies from our median slice. */
async function pair(
  ours: Load,
  theirs: Load | RawPrimitive,
): Promise<{ ours: number; theirs: number; p50: number; p99: number }> {
  const latencies: { rate: number; p50: number; p99: number }[] = [];
  const [rate, baseline] = await medianRatesAbba(
    ROUNDS,
    async () => {
      const result = await load(ours, SLICE_MS, CONNECTIONS);
      latencies.push(result);
      return result.rate;
    },
    async () => {
      if ("url" in theirs) return (await load(theirs, SLICE_MS, CONNECTIONS)).rate;
      let i = 0;
      const write = theirs.write;
      return (await throughput(() => write(i++), 1, { minMs: SLICE_MS, warmupMs: 0, rounds: 1 }))
        .opsPerSec;
    },
  );
  const middle = [...latencies].sort((a, b) => a.rate - b.rate)[latencies.length >> 1];
  return { ours: rate, theirs: baseline, p50: middle?.p50 ?? 0, p99: middle?.p99 ?? 0 };
}

const latency = (name: string, p50: number, p99: number) =>
  `${name}: p50 ${p50.toFixed(2)} ms, p99 ${p99.toFixed(2)} ms`;

/** The durable rows of one backend: the allowed retry-safe send, and A2UI claim + settle. */
async function durableRows(
  backend: string,
  storeUrl: string,
  raw: () => RawPrimitive,
  rows: BenchRow[],
  notes: string[],
): Promise<void> {
  const running = await service(storeUrl);
  const primitive = raw();
  try {
    // Warm the route once (JIT, the ticket's counter row) before measuring.
    await load(allowedSend(running.url, `${backend}-warm`), 200, CONNECTIONS);
    const send = await pair(allowedSend(running.url, `${backend}-send`), primitive);
    rows.push(
      ratioRow(
        `service allowed retry-safe send (${backend}), c=${CONNECTIONS}`,
        send.ours,
        { name: `${backend} ${primitive.name}`, value: send.theirs },
        "requests/s ÷ raw single-write primitive ops/s, same database, same run",
        { text: "≥ 0.5× the raw single-write primitive", minRatio: 0.5 },
      ),
    );
    notes.push(latency(`allowed send (${backend})`, send.p50, send.p99));
    const a2ui = await pair(a2uiClaimSettle(running.url, `${backend}-a2ui`), primitive);
    // Two requests per call: the rate of calls is half the request rate.
    rows.push(
      ratioRow(
        `service A2UI claim+settle calls/s (${backend}), c=${CONNECTIONS}`,
        a2ui.ours / 2,
        { name: `${backend} ${primitive.name}`, value: a2ui.theirs },
        "calls/s (2 requests each) ÷ raw single-write ops/s, same run (informational: no target)",
      ),
    );
    notes.push(latency(`A2UI claim or settle request (${backend})`, a2ui.p50, a2ui.p99));
  } finally {
    await primitive.close();
    await running.close();
  }
}

export async function run(): Promise<BenchSection> {
  const rows: BenchRow[] = [];
  const notes: string[] = [];
  const scratch = mkdtempSync(join(tmpdir(), "tessera-service-bench-"));
  try {
    // The target row over SQLite (the decision's audit event is a durable write), and the same
    // request over memory stores: the HTTP and kernel work alone (informational).
    for (const [backend, storeUrl] of [
      ["sqlite", `sqlite:${join(scratch, "service.db")}`],
      ["memory stores", "memory"],
    ] as const) {
      const running = await service(storeUrl);
      try {
        const denied = deniedSend(running.url);
        const answer = await fetch(`${running.url}/v1/messages`, {
          method: "POST",
          headers: auth,
          body: denied.requests[0]?.body as string,
        });
        const size = (await answer.text()).length;
        const bare = await bareRoute(size);
        try {
          const result = await pair(denied, deniedSend(bare.url));
          const baseline = {
            name: `bare Fastify POST route, ${size}-byte JSON answer`,
            value: result.theirs,
          };
          const meaning = "requests/s ÷ bare route requests/s, same body and answer size, same run";
          rows.push(
            backend === "sqlite"
              ? ratioRow(
                  `service denied send (${backend}), c=${CONNECTIONS}`,
                  result.ours,
                  baseline,
                  meaning,
                  {
                    text: "≥ 0.5× the bare route",
                    minRatio: 0.5,
                  },
                )
              : ratioRow(
                  `service denied send (${backend}), c=${CONNECTIONS}`,
                  result.ours,
                  baseline,
                  `${meaning} (informational: no durable write)`,
                ),
          );
          notes.push(latency(`denied send (${backend})`, result.p50, result.p99));
        } finally {
          await bare.close();
        }
      } finally {
        await running.close();
      }
    }

    await durableRows(
      "sqlite",
      `sqlite:${join(scratch, "durable.db")}`,
      () => rawSqlite(join(scratch, "raw.db")),
      rows,
      notes,
    );

    const base = process.env.TESSERA_PG_URL;
    if (base === undefined || base === "") {
      notes.push("postgres: TESSERA_PG_URL is not set: no PostgreSQL rows");
    } else {
      const schema = `tessera_svc_bench_${process.pid}_${randomBytes(3).toString("hex")}`;
      const url = new URL(base);
      url.searchParams.set("schema", schema);
      const admin = new pg.Pool({ connectionString: base, max: 1 });
      try {
        await durableRows("postgres", url.toString(), () => rawPostgres(base, schema), rows, notes);
      } catch (error) {
        notes.push(`postgres: FAILED, no figures: ${(error as Error).message}`);
      } finally {
        await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
        await admin.end();
      }
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  notes.push(
    `autocannon in this process, ${CONNECTIONS} connection, ${ROUNDS} alternating ${SLICE_MS} ms slices per side (ABBA), median slice rate per side; the client's own work shares the event loop with the service (and with the bare route alike)`,
    "denied send: no callId (not retry-safe), a recipient nobody holds a ticket for; the decision is still audited in the store",
    "allowed send: a fresh callId per request, one bounded ticket spent per send; the retry-safe path writes the call's claim, the spend and an audit event before the reply, the answer and two settles after it",
  );
  return { name: "service", rows, notes };
}
