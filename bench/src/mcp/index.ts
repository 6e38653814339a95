import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import {
  type ClaimStore,
  type GrantSource,
  type GrantUsageStore,
  InMemoryAuditSink,
  InMemoryClaimStore,
  InMemoryGrantStore,
  InMemoryGrantUsageStore,
  openStores,
  type ReadableAuditSink,
  type StoreBundle,
} from "@tessera/core";
import { createMcpGateway, listenMcpGateway, type McpGateway, tokenDigest } from "@tessera/mcp";
import { z } from "zod";
import { medianRatesAbba, throughput } from "../measure.js";
import { type BenchRow, type BenchSection, ratioRow } from "../report.js";

/**
 * `tools/call` through the MCP gateway against the same call made straight to the same upstream
 * server, with the same SDK client and the same transport (Streamable HTTP on loopback), in
 * alternating rounds of the same run. The memory row is the gateway's whole overhead (claim,
 * kernel decision, audit, and the answer kept and settled after the reply); each durable row is compared with the upstream
 * call plus the store's own claim primitive (`ClaimStore.claim` of a fresh key, itself measured
 * against the driver's bare INSERT / SET NX in the stores section).
 */

const TOKEN = "bench-token";
const PRINCIPAL = {
  tokenSha256: tokenDigest(TOKEN),
  namespaceId: "bench",
  actor: "agent",
  authority: "host",
};
const ROUNDS = 4;
const MEASURE = { minMs: 400, warmupMs: 150, rounds: 1 } as const;

function echoServer(): McpServer {
  const server = new McpServer({ name: "bench-upstream", version: "1.0.0" });
  server.registerTool("echo", { inputSchema: { text: z.string() } }, async ({ text }) => ({
    content: [{ type: "text", text }],
  }));
  return server;
}

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

/** The upstream: the SDK's McpServer with one `echo` tool, one session per client. */
async function startUpstream(): Promise<{ url: string; close(): Promise<void> }> {
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const http: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = chunks.length === 0 ? undefined : JSON.parse(Buffer.concat(chunks).toString());
    const id = req.headers["mcp-session-id"];
    const known = typeof id === "string" ? sessions.get(id) : undefined;
    if (known !== undefined) return known.handleRequest(req, res, body);
    const server = echoServer();
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      enableJsonResponse: true,
      onsessioninitialized: (sid) => void sessions.set(sid, transport),
    });
    await server.connect(transport);
    return transport.handleRequest(req, res, body);
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}

async function client(url: string, token?: string): Promise<Client> {
  const c = new Client({ name: "bench-client", version: "1.0.0" });
  await c.connect(
    new StreamableHTTPClientTransport(
      new URL(url),
      token === undefined ? {} : { requestInit: { headers: { authorization: `Bearer ${token}` } } },
    ),
  );
  return c;
}

interface Ports {
  readonly grants: GrantSource & { add: InMemoryGrantStore["add"] };
  readonly usage: GrantUsageStore;
  readonly claims: ClaimStore;
  readonly audit: ReadableAuditSink;
}

async function gatewayOver(
  upstream: string | InMemoryTransport,
  ports: Ports,
): Promise<{ gateway: McpGateway; url: string; close(): Promise<void> }> {
  await ports.grants.add({
    id: `bench-echo-${randomUUID()}`,
    namespaceId: "bench",
    issuer: "host",
    subject: "agent",
    capabilities: [
      {
        resource: { namespace: "mcp", path: ["up", "echo"] },
        actions: ["tools/call"],
        scope: "exact",
      },
    ],
    issuedAt: new Date(Date.now() - 1000).toISOString(),
  });
  const gateway = await createMcpGateway({
    upstreams: { up: typeof upstream === "string" ? { url: upstream } : { transport: upstream } },
    principals: [PRINCIPAL],
    ...ports,
  });
  const listening = await listenMcpGateway(gateway);
  return {
    gateway,
    url: listening.url,
    close: async () => {
      await listening.close();
      await gateway.close();
    },
  };
}

const ARGS = { text: "hello" };

export async function run(): Promise<BenchSection> {
  const rows: BenchRow[] = [];
  const notes: string[] = [];
  const upstream = await startUpstream();
  const direct = await client(upstream.url);
  const directRate = async () =>
    (await throughput(() => direct.callTool({ name: "echo", arguments: ARGS }), 1, MEASURE))
      .opsPerSec;
  try {
    const memory = await gatewayOver(upstream.url, {
      grants: new InMemoryGrantStore(),
      usage: new InMemoryGrantUsageStore(),
      claims: new InMemoryClaimStore(),
      audit: new InMemoryAuditSink(),
    });
    const viaMemory = await client(memory.url, TOKEN);
    const [gw, straight] = await medianRatesAbba(
      ROUNDS,
      async () =>
        (
          await throughput(
            () => viaMemory.callTool({ name: "up.echo", arguments: ARGS }),
            1,
            MEASURE,
          )
        ).opsPerSec,
      directRate,
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
    await viaMemory.close();
    await memory.close();

    // Informational: the gateway's own work, with no transport cost on either side.
    const [gatewaySide, upstreamSide] = InMemoryTransport.createLinkedPair();
    await echoServer().connect(upstreamSide);
    const bare = await gatewayOver(gatewaySide, {
      grants: new InMemoryGrantStore(),
      usage: new InMemoryGrantUsageStore(),
      claims: new InMemoryClaimStore(),
      audit: new InMemoryAuditSink(),
    });
    const viaBare = await inMemoryClient((side) => bare.gateway.serve(side, TOKEN));
    const directBare = await inMemoryClient((side) => echoServer().connect(side));
    const [bareGw, bareDirect] = await medianRatesAbba(
      ROUNDS,
      async () =>
        (await throughput(() => viaBare.callTool({ name: "up.echo", arguments: ARGS }), 1, MEASURE))
          .opsPerSec,
      async () =>
        (await throughput(() => directBare.callTool({ name: "echo", arguments: ARGS }), 1, MEASURE))
          .opsPerSec,
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
    await viaBare.close();
    await directBare.close();
    await bare.close();

    const run = `mcpbench_${randomUUID().replaceAll("-", "").slice(0, 10)}`;
    const scratch = mkdtempSync(join(tmpdir(), "tessera-mcp-bench-"));
    const durable: [string, string | undefined][] = [
      ["sqlite", `sqlite:${join(scratch, "bench.db")}`],
      ["postgres", process.env.TESSERA_PG_URL && `${process.env.TESSERA_PG_URL}?schema=${run}`],
      ["redis", process.env.TESSERA_REDIS_URL && `${process.env.TESSERA_REDIS_URL}?prefix=${run}:`],
    ];
    try {
      for (const [name, url] of durable) {
        if (!url) {
          notes.push(
            `${name}: its service URL is not set (TESSERA_PG_URL / TESSERA_REDIS_URL): no row`,
          );
          continue;
        }
        let stores: StoreBundle | undefined;
        try {
          stores = await openStores(url);
          const opened = stores;
          const gateway = await gatewayOver(upstream.url, opened);
          const via = await client(gateway.url, TOKEN);
          let n = 0;
          const [gwRate, baseRate] = await medianRatesAbba(
            ROUNDS,
            async () =>
              (
                await throughput(
                  () => via.callTool({ name: "up.echo", arguments: ARGS }),
                  1,
                  MEASURE,
                )
              ).opsPerSec,
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
          await via.close();
          await gateway.close();
        } catch (error) {
          notes.push(`${name}: FAILED, no figures: ${(error as Error).message}`);
        } finally {
          await stores?.close();
        }
      }
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
    notes.push(
      "the gateway's durable path, before the reply: the call's claim, the kernel's grant read (a version check when warm), the usage check and one audit event; after the reply: the kept answer (a second claim) and two settles. The baseline is one claim",
      "the gateway's HTTP: its client-facing side is the SDK's Streamable HTTP server transport (JSON responses), its upstream clients the SDK's Streamable HTTP client over a node:http keep-alive fetch; the client and the upstream here are the SDK's own (fetch, web-standard server transport) on both rows",
    );
  } finally {
    await direct.close();
    await upstream.close();
  }
  return { name: "mcp", rows, notes };
}
