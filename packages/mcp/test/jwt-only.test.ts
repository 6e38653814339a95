import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { InMemoryGrantStore, InMemoryGrantUsageStore, isTesseraError } from "@tessera/core";
import {
  createMcpGateway,
  listenMcpGateway,
  type McpGateway,
  parseGatewayConfig,
} from "@tessera/mcp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
// The one verifier both faces use; the test reaches it by path (the CLI composes the two).
import { JwtVerifier, parseJwtIdentity } from "../../server/src/identity/index.js";
import { signingKey, startIssuer, type TestIssuer } from "../../server/test/support/oidc.js";
import { ALICE_TOKEN, textOf, toolGrant } from "./support.js";

/**
 * A JWT-only gateway: no static principal, every caller brings the identity provider's access
 * token (a real `oidc-provider`), over HTTP. The mapped principal decides (allowed with its
 * grant, denied without), a static token is not let in, stdio is refused for want of a token
 * to verify, and a reused token is verified once (the verifier's cache).
 */
const SECRET = "client-secret-".padEnd(48, "z");
const BIN = fileURLToPath(new URL("../../cli/dist/bin.js", import.meta.url));
let issuer: TestIssuer;
let upstream: Server;
let gateway: McpGateway;
let gatewayUrl: string;
let verifier: JwtVerifier;
let closeAll: () => Promise<void>;

async function startUpstream(): Promise<string> {
  upstream = createServer(async (req, res) => {
    const server = new McpServer({ name: "jwt-only-upstream", version: "1.0.0" });
    server.registerTool("echo", { inputSchema: { text: z.string() } }, async ({ text }) => ({
      content: [{ type: "text", text }],
    }));
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    await server.connect(transport);
    await transport.handleRequest(req, res);
  });
  await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/mcp`;
}

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

beforeAll(async () => {
  issuer = await startIssuer(
    [
      { id: "granted", secret: SECRET, claims: {} },
      { id: "ungranted", secret: SECRET, claims: {} },
    ],
    [await signingKey("jwt-only-k1")],
  );
  const port = await freePort();
  const resource = `http://127.0.0.1:${port}/mcp`;
  verifier = new JwtVerifier(
    parseJwtIdentity({
      issuer: issuer.issuer,
      audience: resource,
      jwksUri: issuer.jwksUri,
      algorithms: ["ES256"],
      claims: {
        namespaceId: { value: "acme" },
        actor: { claim: "client_id" },
        authority: { value: "host" },
      },
    }),
  );
  const grants = new InMemoryGrantStore();
  await grants.add(toolGrant("granted", ["up", "echo"]));
  // A static principal of other gateways holds a grant here too: its token must still not pass.
  await grants.add(toolGrant("alice", ["up", "echo"]));
  gateway = await createMcpGateway({
    upstreams: { up: { url: await startUpstream() } },
    principals: [],
    grants,
    usage: new InMemoryGrantUsageStore(),
    protectedResource: { resource, authorizationServers: [issuer.issuer], verifier },
  });
  const listening = await listenMcpGateway(gateway, { port });
  gatewayUrl = listening.url;
  closeAll = async () => {
    await listening.close();
    await gateway.close();
    await new Promise<void>((resolve) => upstream.close(() => resolve()));
    await issuer.close();
  };
}, 30_000);

afterAll(async () => {
  await closeAll?.();
});

async function connect(token: string): Promise<Client> {
  const client = new Client({ name: "jwt-only", version: "1.0.0" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(gatewayUrl), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}

const post = (token: string) =>
  fetch(gatewayUrl, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      authorization: `Bearer ${token}`,
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
  });

describe("a JWT-only MCP gateway (no static principal)", () => {
  it("lets the provider's token in as its mapped principal: allowed with a grant", async () => {
    const client = await connect(await issuer.token("granted", gatewayUrl));
    try {
      expect((await client.listTools()).tools.map((t) => t.name)).toEqual(["up.echo"]);
      const result = await client.callTool({ name: "up.echo", arguments: { text: "hi" } });
      expect(result.isError ?? false).toBe(false);
      expect(textOf(result)).toBe("hi");
    } finally {
      await client.close();
    }
  });

  it("denies the call of a mapped principal without a grant", async () => {
    const client = await connect(await issuer.token("ungranted", gatewayUrl));
    try {
      expect((await client.listTools()).tools).toEqual([]);
      const refused = await client.callTool({ name: "up.echo", arguments: { text: "hi" } });
      expect(refused.isError).toBe(true);
    } finally {
      await client.close();
    }
  });

  it("refuses a static token 401: there are no static principals to match it", async () => {
    const reply = await post(ALICE_TOKEN);
    expect(reply.status).toBe(401);
    expect(reply.headers.get("www-authenticate")).toMatch(/^Bearer error="invalid_token"/);
  });

  it("verifies a reused token once: the next request is answered from the cache", async () => {
    const token = await issuer.token("granted", gatewayUrl);
    const before = verifier.stats;
    // Authenticated (past the 401), then told to initialize: the token was accepted each time.
    expect((await post(token)).status).toBe(400);
    expect((await post(token)).status).toBe(400);
    expect((await post(token)).status).toBe(400);
    const after = verifier.stats;
    expect(after.verified - before.verified).toBe(1);
    expect(after.cacheHits - before.cacheHits).toBe(2);
  });

  it("refuses stdio: a stdio connection carries no token to verify", async () => {
    const [, server] = InMemoryTransport.createLinkedPair();
    const error = await gateway.serve(server, "any-token").catch((e: unknown) => e);
    expect(isTesseraError(error, "invalid_config")).toBe(true);
    expect((error as Error).message).toMatch(/no static principal .*stdio/);
  });
});

describe("configuring a JWT-only gateway", () => {
  const upstreams = { up: { url: "http://127.0.0.1:9/mcp" } };

  it("a config may leave principals out when it names an identity provider", () => {
    expect(parseGatewayConfig({ upstreams, identity: "identity.json" }).principals).toEqual([]);
    expect(
      parseGatewayConfig({ upstreams, principals: [], identity: "identity.json" }).principals,
    ).toEqual([]);
  });

  it("a config with neither principals nor identity is invalid_config naming both", () => {
    for (const config of [{ upstreams }, { upstreams, principals: [] }]) {
      let error: unknown;
      try {
        parseGatewayConfig(config);
      } catch (e) {
        error = e;
      }
      expect(isTesseraError(error, "invalid_config")).toBe(true);
      expect((error as Error).message).toMatch(/principals: .*principal.*identity/);
    }
  });

  it("createMcpGateway refuses no principal without a protectedResource", async () => {
    const error = await createMcpGateway({
      upstreams: {},
      principals: [],
      grants: new InMemoryGrantStore(),
    }).catch((e: unknown) => e);
    expect(isTesseraError(error, "invalid_config")).toBe(true);
    expect((error as Error).message).toMatch(/at least one principal .* or an identity provider/);
  });

  it("tessera mcp --stdio refuses a JWT-only config before opening anything", () => {
    const dir = mkdtempSync(join(tmpdir(), "mcp-jwt-only-"));
    const file = join(dir, "gateway.json");
    writeFileSync(file, JSON.stringify({ upstreams, identity: "identity.json" }));
    const run = spawnSync(process.execPath, [BIN, "mcp", "--config", file, "--stdio"], {
      encoding: "utf8",
      timeout: 60_000,
      env: { ...process.env, TESSERA_MCP_TOKEN: "whatever" },
    });
    expect(run.status).not.toBe(0);
    expect(run.stdout).toBe("");
    expect(run.stderr).toMatch(
      /invalid_config: .* names no principal \(JWT-only\): a stdio connection carries no bearer token/,
    );
  });
});
