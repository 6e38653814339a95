import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import {
  type ClaimStore,
  type GrantInput,
  type GrantStore,
  InMemoryAuditSink,
  InMemoryClaimStore,
  InMemoryGrantStore,
  InMemoryGrantUsageStore,
} from "@tessera/core";
import {
  createMcpGateway,
  type ListeningGateway,
  listenMcpGateway,
  type McpGateway,
  type McpGatewayOptions,
  type Principal,
  tokenDigest,
} from "@tessera/mcp";
import { z } from "zod";

export const UPSTREAM = fileURLToPath(new URL("./fixtures/upstream.mjs", import.meta.url));

export const ALICE_TOKEN = "alice-token-0123456789";
export const DAVE_TOKEN = "dave-token-0123456789";

export function principal(actor: string, token: string): Principal {
  return {
    tokenSha256: tokenDigest(token),
    namespaceId: "acme",
    actor,
    authority: "host",
    owner: "owner-1",
  };
}
export const PRINCIPALS: Principal[] = [
  principal("alice", ALICE_TOKEN),
  principal("dave", DAVE_TOKEN),
];

let grantSeq = 0;
/** Grant IDs are unique per test run: durable stores keep them between runs. */
const RUN = Math.random().toString(36).slice(2, 10);
/** A `tools/call` grant on one MCP resource path, issued by the turns' authority. */
export function toolGrant(
  subject: string,
  path: string[],
  options: { maxUses?: number; scope?: "exact" | "descendants" } = {},
): GrantInput {
  grantSeq++;
  return {
    id: `g-${RUN}-${subject}-${grantSeq}`,
    namespaceId: "acme",
    issuer: "host",
    subject,
    capabilities: [
      {
        resource: { namespace: "mcp", path },
        actions: ["tools/call"],
        scope: options.scope ?? "exact",
      },
    ],
    constraints: options.maxUses === undefined ? {} : { maxUses: options.maxUses },
    issuedAt: "2020-01-01T00:00:00.000Z",
  };
}

export interface Harness {
  readonly url: string;
  /** The gateway's HTTP side: `close()` here stops it alone, as `tessera mcp` does. */
  readonly listening: ListeningGateway;
  readonly gateway: McpGateway;
  readonly grants: GrantStore;
  readonly audit: InMemoryAuditSink;
  readonly claims: ClaimStore;
  readonly countFile: string;
  counts(tool?: string): number;
  client(token: string): Promise<Client>;
  close(): Promise<void>;
}

/** A gateway on loopback in front of the counting upstream (spawned over stdio). */
export async function startHarness(
  extra: Partial<McpGatewayOptions> = {},
  grants: GrantInput[] = [],
  listen: Parameters<typeof listenMcpGateway>[1] = {},
): Promise<Harness> {
  const dir = mkdtempSync(join(tmpdir(), "tessera-mcp-"));
  const countFile = join(dir, "count.jsonl");
  const grantStore = new InMemoryGrantStore();
  for (const grant of grants) await grantStore.add(grant);
  const audit = new InMemoryAuditSink();
  const claims = extra.claims ?? new InMemoryClaimStore();
  const gateway = await createMcpGateway({
    upstreams: {
      messages: {
        command: process.execPath,
        args: [UPSTREAM],
        env: { COUNT_FILE: countFile, PATH: process.env.PATH ?? "" },
      },
    },
    tools: { messages: { send_message: { bind: ["to"] } } },
    principals: PRINCIPALS,
    grants: grantStore,
    usage: new InMemoryGrantUsageStore(),
    claims,
    audit,
    ...extra,
  });
  const listening = await listenMcpGateway(gateway, listen);
  const clients: Client[] = [];
  return {
    url: listening.url,
    listening,
    gateway,
    grants: grantStore,
    audit,
    claims,
    countFile,
    counts: (tool) => readCounts(countFile, tool),
    client: async (token) => {
      const client = await connectClient(listening.url, token);
      clients.push(client);
      return client;
    },
    close: async () => {
      await Promise.allSettled(clients.map((c) => c.close()));
      await listening.close();
      await gateway.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export async function connectClient(url: string, token: string): Promise<Client> {
  const client = new Client({ name: "test-client", version: "1.0.0" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}

export function readCounts(countFile: string, tool?: string): number {
  let text = "";
  try {
    text = readFileSync(countFile, "utf8");
  } catch {
    return 0;
  }
  return text
    .split("\n")
    .filter((line) => line !== "")
    .filter((line) => tool === undefined || (JSON.parse(line) as { tool: string }).tool === tool)
    .length;
}

/** The text of a tool result's first content block. */
export function textOf(result: unknown): string {
  const content = (result as { content?: { type: string; text?: string }[] }).content ?? [];
  return content[0]?.text ?? "";
}

/** One HTTP request an in-process upstream received: its JSON-RPC method and the headers of interest. */
export interface SeenRequest {
  readonly method: string | undefined;
  readonly authorization: string | undefined;
  readonly traceparent: string | undefined;
  readonly tracestate: string | undefined;
  /** What the upstream answered: 401 when `admit` refused it. */
  readonly status: number;
}

export interface HttpUpstream {
  readonly url: string;
  readonly seen: SeenRequest[];
  /** How many times its `echo` tool ran. */
  echoes(): number;
  close(): Promise<void>;
}

/**
 * A Streamable HTTP MCP server in this process (stateless, the SDK's own) with one tool, `echo`,
 * recording every request's method, `authorization`, `traceparent` and `tracestate`. `admit` decides whether a
 * request gets in (else 401 and nothing runs).
 */
export async function startHttpUpstream(
  admit: (authorization: string | undefined) => Promise<boolean> | boolean = () => true,
): Promise<HttpUpstream> {
  const seen: SeenRequest[] = [];
  let echoes = 0;
  const server = createServer(async (req, res) => {
    const body = await readBody(req);
    const method = (body as { method?: string } | undefined)?.method;
    const admitted = await admit(req.headers.authorization);
    seen.push({
      method,
      authorization: req.headers.authorization,
      traceparent: req.headers.traceparent as string | undefined,
      tracestate: req.headers.tracestate as string | undefined,
      status: admitted ? 200 : 401,
    });
    if (!admitted) {
      res.writeHead(401, { "www-authenticate": 'Bearer error="invalid_token"' }).end();
      return;
    }
    const mcp = new McpServer({ name: "http-upstream", version: "1.0.0" });
    mcp.registerTool("echo", { inputSchema: { text: z.string() } }, async ({ text }) => {
      echoes++;
      return { content: [{ type: "text", text }] };
    });
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
    });
    res.on("close", () => {
      void transport.close();
      void mcp.close();
    });
    await mcp.connect(transport);
    await transport.handleRequest(req, res, body);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
    seen,
    echoes: () => echoes,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  if (chunks.length === 0) return undefined;
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown;
  } catch {
    return undefined;
  }
}
