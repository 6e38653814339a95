import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { openStores, type StoreBundle } from "@tessera/core";
import { medianRatesAbba, throughput, throughputInFlight } from "../measure.js";
import { type BenchRow, type BenchSection, ratioRow } from "../report.js";
import { deleteRedisPrefix, dropPostgresSchema } from "../scratch.js";
import { act } from "../stores/acts.js";
import { startChild } from "./child.js";
import { client } from "./client.js";
import { gatewayOver, memoryPorts, TOKEN } from "./gateway-setup.js";
import { echoServer, startUpstream } from "./upstream.js";

/**
 * `tools/call` through the MCP gateway against the same call made straight to the same upstream
 * server, with the same SDK client and the same transport (Streamable HTTP on loopback), in
 * alternating rounds of the same run. As deployed, the upstream server and the gateway each run
 * in a process of their own; the bench process is the client on both sides of every ratio. The
 * memory row is the gateway's whole overhead (claim, kernel decision, audit, and the answer kept
 * and settled after the reply); each durable row is compared with the upstream call plus the
 * store's own claim primitive (`ClaimStore.claim` of a fresh key, itself measured against the
 * driver's bare INSERT / SET NX in the stores section). Two informational rows keep everything
 * in one process: over loopback HTTP, and over in-memory transports (the gateway's own work).
 */

const ROUNDS = 4;
/**
 * Issue 22's durable-vs-memory rows and their ceilings: twice the rounds. On two cores shared
 * by five processes one 400 ms slice of the same gateway ranged 445–1,019 calls/s in one run,
 * and a median of four moved these ratios by ±0.1 from run to run.
 */
const TARGET_ROUNDS = 8;
const MEASURE = { minMs: 400, warmupMs: 150, rounds: 1 } as const;
const ARGS = { text: "hello" };
const WARM_CALLS = 2_000;

/** A client wired to `connect` over an in-memory pair (no transport cost at all). */
async function inMemoryClient(
  connect: (side: InMemoryTransport) => Promise<void>,
): Promise<Client> {
  const [mine, theirs] = InMemoryTransport.createLinkedPair();
  await connect(theirs);
  const c = new Client({ name: "bench-client", version: "1.0.0" });
  await c.connect(mine);
  return c;
}

/**
 * Runs `calls` calls through `c` before anything is measured: a server in a fresh process runs
 * its first few hundred calls unoptimized, which the short measured slices would otherwise
 * count against whichever side has the most code in that process.
 */
async function warm(c: Client, name: string, calls = WARM_CALLS): Promise<void> {
  for (let i = 0; i < calls; i++) await c.callTool({ name, arguments: ARGS });
}

/** Calls per second of `name` through `c`, one at a time. */
function rate(c: Client, name: string): () => Promise<number> {
  return async () =>
    (await throughput(() => c.callTool({ name, arguments: ARGS }), 1, MEASURE)).opsPerSec;
}

/**
 * Calls per second of `name` through `c` with `inFlight` calls in flight: each of `inFlight`
 * callers sends its next call when its last answered, as clients of a gateway do.
 */
function rateAt(c: Client, name: string, inFlight: number): () => Promise<number> {
  if (inFlight === 1) return rate(c, name);
  return async () =>
    (await throughputInFlight(() => c.callTool({ name, arguments: ARGS }), inFlight, MEASURE))
      .opsPerSec;
}

/**
 * Issue 22's targets: the gateway over a durable store against the same gateway over memory
 * stores (both in processes of their own, same upstream), at 1 and 8 calls in flight; and the
 * ceiling at both: the memory gateway's call plus one act recorded by the store's own ledger in
 * this process, one after the other — what a durable gateway could reach if the act were its
 * only extra cost.
 */
async function versusMemoryRows(
  rows: BenchRow[],
  name: string,
  via: Client,
  viaMemory: Client,
  stores: StoreBundle,
): Promise<void> {
  for (const inFlight of [1, 8]) {
    const [durable, memory] = await medianRatesAbba(
      TARGET_ROUNDS,
      rateAt(via, "up.echo", inFlight),
      rateAt(viaMemory, "up.echo", inFlight),
    );
    rows.push(
      ratioRow(
        `mcp tools/call via gateway (${name} stores) vs memory stores, c=${inFlight}`,
        durable,
        { name: "the same gateway with memory stores", value: memory },
        "gateway ops/s over the durable store ÷ over memory stores, same upstream, same run",
        { text: "≥ 0.75× the memory-store gateway", minRatio: 0.75 },
      ),
    );
  }
  let n = 0;
  const tag = `ceiling-${randomUUID()}`;
  // The memory gateway's call, then one act recorded by the store's own ledger in this
  // process; at c=8 by eight callers in turn, as `rateAt` sends the calls.
  const pair = async () => {
    await stores.acts.record(act(tag, n++));
    await viaMemory.callTool({ name: "up.echo", arguments: ARGS });
  };
  for (const inFlight of [1, 8]) {
    const [ceiling, memory] = await medianRatesAbba(
      TARGET_ROUNDS,
      async () =>
        (
          await (inFlight === 1
            ? throughput(pair, 1, MEASURE)
            : throughputInFlight(pair, inFlight, MEASURE))
        ).opsPerSec,
      rateAt(viaMemory, "up.echo", inFlight),
    );
    rows.push(
      ratioRow(
        `ceiling: memory-store gateway call + one ${name} act record, c=${inFlight}`,
        ceiling,
        { name: "the gateway with memory stores", value: memory },
        `(memory gateway call, then one acts.record of the store) ops/s ÷ memory gateway ops/s: the bound a durable gateway meets at c=${inFlight}`,
      ),
    );
  }
}

/** Gateway (memory stores) vs direct, every server in the bench process: the layout before the split. */
async function oneProcessRow(rows: BenchRow[]): Promise<void> {
  const upstream = await startUpstream();
  const direct = await client(upstream.url);
  const memory = await gatewayOver(upstream.url, memoryPorts());
  const via = await client(memory.url, TOKEN);
  try {
    const [gw, straight] = await medianRatesAbba(
      ROUNDS,
      rate(via, "up.echo"),
      rate(direct, "echo"),
    );
    rows.push(
      ratioRow(
        "mcp tools/call via gateway (memory stores), client, gateway and upstream in one process, c=1",
        gw,
        { name: "same call straight to the upstream, in the same process", value: straight },
        "gateway ops/s ÷ direct ops/s with every side on one event loop (informational)",
      ),
    );
  } finally {
    await via.close();
    await direct.close();
    await memory.close();
    await upstream.close();
  }
}

/** The gateway's own work: in-memory transports on every side, all in this process. */
async function inMemoryRow(rows: BenchRow[], notes: string[]): Promise<void> {
  const [gatewaySide, upstreamSide] = InMemoryTransport.createLinkedPair();
  await echoServer().connect(upstreamSide);
  const bare = await gatewayOver(gatewaySide, memoryPorts());
  const viaBare = await inMemoryClient((side) => bare.gateway.serve(side, TOKEN));
  const directBare = await inMemoryClient((side) => echoServer().connect(side));
  try {
    const [bareGw, bareDirect] = await medianRatesAbba(
      ROUNDS,
      rate(viaBare, "up.echo"),
      rate(directBare, "echo"),
    );
    rows.push(
      ratioRow(
        "mcp tools/call via gateway, in-memory transports (memory stores), c=1",
        bareGw,
        { name: "same call straight to an in-memory upstream", value: bareDirect },
        "gateway ops/s ÷ direct ops/s with no transport cost: the gateway's own work (informational)",
      ),
    );
    notes.push(
      `gateway work per call with no transport cost: ~${Math.round(1e6 / bareGw - 1e6 / bareDirect)} µs (two SDK hops instead of one, claim, kernel decision, audit; the kept answer and settles after the reply)`,
    );
  } finally {
    await viaBare.close();
    await directBare.close();
    await bare.close();
  }
}

/**
 * The ceiling the SDK sets: a proxy built from the SDK alone (its server transport and client,
 * in a process of its own, forwarding each call and doing nothing else) against the direct
 * call, and the gateway (memory stores) against that proxy: the part of the gateway's cost
 * that is Tessera's.
 */
async function proxyRows(
  rows: BenchRow[],
  notes: string[],
  upstreamUrl: string,
  direct: Client,
  viaGateway: Client,
): Promise<void> {
  const proxy = await startChild({ role: "proxy", upstream: upstreamUrl });
  const viaProxy = await client(proxy.url);
  try {
    await warm(viaProxy, "echo");
    const [proxied, straight] = await medianRatesAbba(
      ROUNDS,
      rate(viaProxy, "echo"),
      rate(direct, "echo"),
    );
    const [gw, proxiedToo] = await medianRatesAbba(
      ROUNDS,
      rate(viaGateway, "up.echo"),
      rate(viaProxy, "echo"),
    );
    rows.push(
      ratioRow(
        "mcp tools/call via a bare SDK proxy (no Tessera), c=1",
        proxied,
        { name: "same call straight to the upstream", value: straight },
        "SDK-only proxy ops/s ÷ direct ops/s, same run: the most a gateway on the SDK's server and client can reach (informational)",
      ),
      ratioRow(
        "mcp tools/call via gateway (memory stores) vs the bare SDK proxy, c=1",
        gw,
        { name: "same call through the bare SDK proxy", value: proxiedToo },
        "gateway ops/s ÷ SDK-only proxy ops/s, same run: Tessera's own share of the gateway's cost (informational)",
      ),
    );
    notes.push(
      `bare SDK proxy: an SDK McpServer (Streamable HTTP server transport, JSON answers) whose tool forwards with an SDK Client over the gateway's own upstream fetch, in its own process; per call ~${Math.round(1e6 / proxied - 1e6 / straight)} µs more than direct, the gateway ~${Math.round(1e6 / gw - 1e6 / proxiedToo)} µs more than the proxy`,
    );
  } finally {
    await viaProxy.close();
    await proxy.close();
  }
}

export async function run(): Promise<BenchSection> {
  const rows: BenchRow[] = [];
  const notes: string[] = [];
  const upstream = await startChild({ role: "upstream" });
  const direct = await client(upstream.url);
  try {
    const memory = await startChild({ role: "gateway", upstream: upstream.url });
    const viaMemory = await client(memory.url, TOKEN);
    try {
      await warm(direct, "echo");
      await warm(viaMemory, "up.echo");
      const [gw, straight] = await medianRatesAbba(
        ROUNDS,
        rate(viaMemory, "up.echo"),
        rate(direct, "echo"),
      );
      rows.push(
        ratioRow(
          "mcp tools/call via gateway (memory stores), c=1",
          gw,
          { name: "same call straight to the upstream", value: straight },
          "gateway ops/s ÷ direct ops/s, same SDK client and transport, same run",
          { text: "overhead ≤ 1.5× (ratio ≥ 0.67)", minRatio: 1 / 1.5 },
        ),
      );
      await proxyRows(rows, notes, upstream.url, direct, viaMemory);
      await oneProcessRow(rows);
      await inMemoryRow(rows, notes);
      await durableRows(rows, notes, upstream.url, direct, viaMemory);
    } finally {
      await viaMemory.close();
      await memory.close();
    }
    notes.push(
      "the upstream server and the gateway run in processes of their own (as deployed); this process is the SDK client of both sides of every ratio, and the baseline's claims run here too",
      `each ratio: the median rates of alternating rounds (ABBA) of ${MEASURE.minMs} ms slices, ${ROUNDS} rounds (${TARGET_ROUNDS} for the durable-vs-memory rows and their ceilings); c=8 is eight callers, each sending its next call when its last answered`,
      "the gateway's durable path before the reply: one act recorded by the store's act ledger (the call's claim, the bounded use, the decision's event: one transaction, calls in flight sharing it), then the upstream call; after the reply, with those of other calls within 10 ms, the answer settled into the claim. The claim-primitive baseline is one claim",
      "the gateway's HTTP: its client-facing side is the SDK's Streamable HTTP server transport (JSON responses), its upstream clients the SDK's Streamable HTTP client over a node:http keep-alive fetch; the client and the upstream here are the SDK's own (fetch; Streamable HTTP server transport) on both rows",
    );
  } finally {
    await direct.close();
    await upstream.close();
  }
  return { name: "mcp", rows, notes };
}

/** The gateway over each durable store: against its claim primitive, and against memory stores. */
async function durableRows(
  rows: BenchRow[],
  notes: string[],
  upstreamUrl: string,
  direct: Client,
  viaMemory: Client,
): Promise<void> {
  const run = `mcpbench_${randomUUID().replaceAll("-", "").slice(0, 10)}`;
  const scratch = mkdtempSync(join(tmpdir(), "tessera-mcp-bench-"));
  // [name, the gateway's store URL, the baseline's]: one SQLite file per process, so the
  // baseline's claims never wait on the gateway's write lock; the servers are shared.
  const pg = process.env.TESSERA_PG_URL && `${process.env.TESSERA_PG_URL}?schema=${run}`;
  const redis = process.env.TESSERA_REDIS_URL && `${process.env.TESSERA_REDIS_URL}?prefix=${run}:`;
  const durable: [string, string | undefined, string | undefined][] = [
    ["sqlite", `sqlite:${join(scratch, "gateway.db")}`, `sqlite:${join(scratch, "raw.db")}`],
    ["postgres", pg, pg],
    ["redis", redis, redis],
  ];
  try {
    for (const [name, url, rawUrl] of durable) {
      if (!url || !rawUrl) {
        notes.push(
          `${name}: its service URL is not set (TESSERA_PG_URL / TESSERA_REDIS_URL): no row`,
        );
        continue;
      }
      let stores: StoreBundle | undefined;
      try {
        // Opened here first, so the schema exists before the gateway process opens it.
        stores = await openStores(rawUrl);
        const opened = stores;
        const gateway = await startChild({
          role: "gateway",
          upstream: upstreamUrl,
          stores: url,
        });
        const via = await client(gateway.url, TOKEN);
        let n = 0;
        try {
          await warm(via, "up.echo");
          const [gwRate, baseRate] = await medianRatesAbba(
            ROUNDS,
            rate(via, "up.echo"),
            async () =>
              (
                await throughput(
                  async () => {
                    n++;
                    await opened.claims.claim(
                      { session: "bench-raw", functionCallId: `raw-${run}-${n}` },
                      { bodyHash: "0".repeat(64), claimedAt: Date.now() },
                    );
                    await direct.callTool({ name: "echo", arguments: ARGS });
                  },
                  1,
                  MEASURE,
                )
              ).opsPerSec,
          );
          rows.push(
            ratioRow(
              `mcp tools/call via gateway (${name} stores), c=1`,
              gwRate,
              { name: `${name} claim primitive + the upstream call`, value: baseRate },
              "gateway ops/s ÷ (one store claim + direct call) ops/s, same run",
              { text: "within 1.3× (ratio ≥ 0.77)", minRatio: 1 / 1.3 },
            ),
          );
          await versusMemoryRows(rows, name, via, viaMemory, opened);
        } finally {
          await via.close();
          await gateway.close();
        }
      } catch (error) {
        notes.push(`${name}: FAILED, no figures: ${(error as Error).message}`);
      } finally {
        await stores?.close();
      }
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
    // The audit trail never expires: without this every run would leave its keys and schema.
    if (process.env.TESSERA_PG_URL) {
      await dropPostgresSchema(process.env.TESSERA_PG_URL, run).catch(() => undefined);
    }
    if (process.env.TESSERA_REDIS_URL) {
      await deleteRedisPrefix(process.env.TESSERA_REDIS_URL, `${run}:`).catch(() => undefined);
    }
  }
}
