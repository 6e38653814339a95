import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ClientCredentialsProvider } from "@modelcontextprotocol/sdk/client/auth-extensions.js";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { InMemoryGrantStore, InMemoryGrantUsageStore } from "@tessera/core";
import { createMcpGateway, listenMcpGateway, loadGatewayConfig } from "@tessera/mcp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
// The one verifier both faces use; the test reaches it by path (the CLI composes the two).
import { JwtVerifier, parseJwtIdentity } from "../../server/src/identity/index.js";
import { signingKey, startIssuer, type TestIssuer } from "../../server/test/support/oidc.js";
import { ALICE_TOKEN, PRINCIPALS, textOf, toolGrant } from "./support.js";

/**
 * The gateway as an OAuth resource server, against a real OpenID provider: Protected Resource
 * Metadata (RFC 9728), the 401 that points at it, 403 insufficient_scope, and the official MCP
 * SDK client following 401 → metadata → client-credentials token → call. The caller's token
 * never reaches the upstream, which sees only its own configured credential.
 */
const SECRET = "client-secret-".padEnd(48, "y");
const UPSTREAM_CREDENTIAL = "Bearer upstream-own-credential-42";
let issuer: TestIssuer;
let upstream: Server;
const upstreamAuthorizations: (string | undefined)[] = [];
let gatewayUrl: string;
let closeAll: () => Promise<void>;
const refusals: { reason: string; detail: string }[] = [];

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

async function startUpstream(): Promise<string> {
  upstream = createServer(async (req, res) => {
    upstreamAuthorizations.push(req.headers.authorization);
    const server = new McpServer({ name: "oauth-upstream", version: "1.0.0" });
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

beforeAll(async () => {
  issuer = await startIssuer(
    [
      { id: "asker", secret: SECRET, claims: {} },
      { id: "other", secret: SECRET, claims: {} },
    ],
    [await signingKey("mcp-k1")],
  );
  const port = await freePort();
  const resource = `http://127.0.0.1:${port}/mcp`;
  const verifier = new JwtVerifier(
    parseJwtIdentity({
      issuer: issuer.issuer,
      audience: resource,
      jwksUri: issuer.jwksUri,
      algorithms: ["ES256"],
      requiredScope: "tessera:call",
      claims: {
        namespaceId: { value: "acme" },
        actor: { claim: "client_id" },
        authority: { value: "host" },
        owner: { value: "owner-1" },
      },
    }),
  );
  const grants = new InMemoryGrantStore();
  await grants.add(toolGrant("asker", ["up", "echo"]));
  await grants.add(toolGrant("alice", ["up", "echo"]));
  const gateway = await createMcpGateway({
    upstreams: {
      up: { url: await startUpstream(), headers: { authorization: UPSTREAM_CREDENTIAL } },
    },
    principals: PRINCIPALS,
    grants,
    usage: new InMemoryGrantUsageStore(),
    protectedResource: {
      resource,
      authorizationServers: [issuer.issuer],
      requiredScope: "tessera:call",
      verifier,
      onRefused: (refusal) => refusals.push(refusal),
    },
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

const post = (token?: string) =>
  fetch(gatewayUrl, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
  });

describe("the MCP gateway as an OAuth resource server", () => {
  it("serves Protected Resource Metadata at the RFC 9728 paths", async () => {
    for (const path of [
      "/.well-known/oauth-protected-resource/mcp",
      "/.well-known/oauth-protected-resource",
    ]) {
      const reply = await fetch(new URL(path, gatewayUrl));
      expect(reply.status).toBe(200);
      expect(await reply.json()).toEqual({
        resource: gatewayUrl,
        authorization_servers: [issuer.issuer],
        bearer_methods_supported: ["header"],
        scopes_supported: ["tessera:call"],
      });
    }
  });

  it("answers a call without a token 401 pointing at the metadata", async () => {
    const reply = await post();
    expect(reply.status).toBe(401);
    expect(reply.headers.get("www-authenticate")).toBe(
      `Bearer resource_metadata="${new URL("/.well-known/oauth-protected-resource/mcp", gatewayUrl)}"`,
    );
  });

  it("refuses a token for another resource 401 invalid_token, and one without the scope 403 insufficient_scope", async () => {
    const elsewhere = await issuer.token("asker", "https://elsewhere.test/", "tessera:call");
    const wrong = await post(elsewhere);
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get("www-authenticate")).toMatch(
      /^Bearer error="invalid_token", error_description="the token is for another audience", resource_metadata="/,
    );
    expect(refusals.at(-1)?.reason).toBe("wrong_audience");

    const unscoped = await issuer.token("asker", gatewayUrl, "tessera:other");
    const short = await post(unscoped);
    expect(short.status).toBe(403);
    expect(short.headers.get("www-authenticate")).toMatch(
      /^Bearer error="insufficient_scope", scope="tessera:call", resource_metadata="/,
    );
    expect(refusals.at(-1)?.reason).toBe("insufficient_scope");
  });

  it("the official SDK client follows 401 → metadata → token and calls; the upstream never sees the caller's token", async () => {
    const provider = new ClientCredentialsProvider({
      clientId: "asker",
      clientSecret: SECRET,
      scope: "tessera:call",
      expectedIssuer: issuer.issuer,
    });
    const client = new Client({ name: "oauth-test", version: "1.0.0" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(gatewayUrl), { authProvider: provider }),
    );
    try {
      const tools = (await client.listTools()).tools.map((t) => t.name);
      expect(tools).toEqual(["up.echo"]);
      const result = await client.callTool({ name: "up.echo", arguments: { text: "hello" } });
      expect(textOf(result)).toBe("hello");
    } finally {
      await client.close();
    }
    const callerToken = provider.tokens()?.access_token;
    expect(callerToken).toMatch(/^ey/);
    expect(upstreamAuthorizations.length).toBeGreaterThan(0);
    for (const seen of upstreamAuthorizations) expect(seen).toBe(UPSTREAM_CREDENTIAL);
  });

  it("static principals keep working beside the issuer's tokens", async () => {
    const client = new Client({ name: "static", version: "1.0.0" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(gatewayUrl), {
        requestInit: { headers: { authorization: `Bearer ${ALICE_TOKEN}` } },
      }),
    );
    try {
      expect((await client.listTools()).tools.map((t) => t.name)).toEqual(["up.echo"]);
    } finally {
      await client.close();
    }
  });

  it("a gateway config names its identity file relative to its own folder", () => {
    const dir = mkdtempSync(join(tmpdir(), "mcp-identity-"));
    const file = join(dir, "gateway.json");
    writeFileSync(
      file,
      JSON.stringify({
        upstreams: { up: { url: "http://127.0.0.1:9/mcp" } },
        principals: [PRINCIPALS[0]],
        identity: "identity.json",
      }),
    );
    expect(loadGatewayConfig(file).identity).toBe(join(dir, "identity.json"));
  });
});
