import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { type Clock, InMemoryGrantUsageStore } from "@tessera/core";
import { loadGatewayConfig, parseGatewayConfig } from "@tessera/mcp";
import { createRemoteJWKSet, jwtVerify } from "jose";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { signingKey, startIssuer, type TestIssuer } from "../../server/test/support/oidc.js";
import {
  ALICE_TOKEN,
  type Harness,
  type HttpUpstream,
  PRINCIPALS,
  startHarness,
  startHttpUpstream,
  textOf,
  toolGrant,
} from "./support.js";

/**
 * An HTTP upstream with its own OAuth credential: the gateway gets an access token from a real
 * OpenID provider by client credentials and sends it, never the caller's token. The upstream
 * checks each token against the provider's keys and its own audience and refuses anything
 * else. One token serves every call until shortly before it expires; a 401 gets one new token
 * and one retry; a token endpoint that is down fails the call before anything is sent.
 */
const CLIENT = "gateway-upstream";
const SECRET = "upstream-client-secret-".padEnd(48, "z");
const KEY = "io.tessera/idempotency-key";
let issuer: TestIssuer;
let dir: string;
let secretFile: string;
/** In front of the provider's token endpoint: counts token requests, and can be taken down. */
let tokenProxy: Server;
let tokenUrl: string;
let tokenRequests = 0;
let tokenDown = false;
/** Whether the last token request authenticated with HTTP Basic (else in the form body). */
let lastBasic = false;
let upstream: HttpUpstream;
/** Tokens the upstream no longer takes (as if revoked), beside its signature and audience checks. */
const revoked = new Set<string>();
/** While set, the upstream refuses every token (a misconfigured audience, say). */
let refuseAll = false;
let harness: Harness | undefined;
let offset = 0;
/**
 * The gateway's clock: still unless a test moves it forward (tokens expire, backoffs pass by it),
 * so a loaded machine taking its time between two calls changes nothing.
 */
const START = Date.now();
const clock: Clock = { now: () => START + offset };
let seq = 0;

beforeAll(async () => {
  issuer = await startIssuer(
    [{ id: CLIENT, secret: SECRET, claims: {} }],
    [await signingKey("u1")],
  );
  dir = mkdtempSync(join(tmpdir(), "tessera-mcp-upauth-"));
  secretFile = join(dir, "client-secret");
  writeFileSync(secretFile, `${SECRET}\n`, { mode: 0o600 });
  tokenProxy = createServer(async (req, res) => {
    tokenRequests++;
    lastBasic = req.headers.authorization?.startsWith("Basic ") === true;
    if (tokenDown) {
      res.writeHead(503).end();
      return;
    }
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const reply = await fetch(`${issuer.issuer}/token`, {
      method: "POST",
      headers: {
        "content-type": req.headers["content-type"] ?? "",
        ...(req.headers.authorization === undefined
          ? {}
          : { authorization: req.headers.authorization }),
      },
      body: Buffer.concat(chunks),
    });
    res.writeHead(reply.status, { "content-type": "application/json" });
    res.end(await reply.text());
  });
  await new Promise<void>((resolve) => tokenProxy.listen(0, "127.0.0.1", resolve));
  tokenUrl = `http://127.0.0.1:${(tokenProxy.address() as AddressInfo).port}/token`;
  const jwks = createRemoteJWKSet(new URL(issuer.jwksUri));
  let audience = "";
  upstream = await startHttpUpstream(async (authorization) => {
    const token = /^Bearer (.+)$/.exec(authorization ?? "")?.[1];
    if (token === undefined || revoked.has(token) || refuseAll) return false;
    try {
      const { payload } = await jwtVerify(token, jwks, { issuer: issuer.issuer, audience });
      return payload.client_id === CLIENT;
    } catch {
      return false;
    }
  });
  audience = upstream.url;
}, 30_000);

afterEach(async () => {
  await harness?.close();
  harness = undefined;
  tokenDown = false;
  refuseAll = false;
  revoked.clear();
});

afterAll(async () => {
  await upstream?.close();
  await new Promise<void>((resolve) => tokenProxy.close(() => resolve()));
  await issuer?.close();
  rmSync(dir, { recursive: true, force: true });
});

function auth(extra: Record<string, unknown> = {}) {
  return {
    type: "client_credentials" as const,
    tokenUrl,
    clientId: CLIENT,
    clientSecretFile: secretFile,
    scope: "tessera:call",
    resource: upstream.url,
    ...extra,
  };
}

async function gateway(extra: Record<string, unknown> = {}, maxUses?: number): Promise<Client> {
  harness = await startHarness(
    {
      upstreams: { up: { url: upstream.url, auth: auth(extra) } },
      tools: {},
      clock,
      usage: new InMemoryGrantUsageStore(),
    },
    [toolGrant("alice", ["up", "echo"], maxUses === undefined ? {} : { maxUses })],
  );
  return harness.client(ALICE_TOKEN);
}

function echo(client: Client, text: string) {
  seq++;
  return client.callTool({
    name: "up.echo",
    arguments: { text },
    _meta: { [KEY]: `upauth-${seq}-${Math.random()}` },
  });
}

function bearer(authorization: string | undefined): string | undefined {
  return /^Bearer (.+)$/.exec(authorization ?? "")?.[1];
}

function rpcError(error: unknown): { code?: string; message: string } {
  const e = error as { data?: { code?: string }; message: string };
  return { code: e.data?.code, message: e.message };
}

describe("an HTTP upstream with OAuth client credentials", () => {
  it("sends its own token, one for every call while it is fresh; the caller's token never goes upstream", async () => {
    const before = tokenRequests;
    const seen = upstream.seen.length;
    const client = await gateway();
    for (const text of ["one", "two", "three"]) expect(textOf(await echo(client, text))).toBe(text);
    expect(tokenRequests - before).toBe(1);
    const requests = upstream.seen.slice(seen);
    expect(requests.filter((r) => r.method === "tools/call")).toHaveLength(3);
    const tokens = new Set(requests.map((r) => bearer(r.authorization)));
    expect(tokens.size).toBe(1);
    const [token] = [...tokens];
    expect(token).toMatch(/^ey/);
    for (const r of requests) {
      expect(r.status).toBe(200);
      expect(r.authorization).not.toContain(ALICE_TOKEN);
    }
  });

  it("the secret can come from an environment variable, sent in the form body (client_secret_post) when asked", async () => {
    const client = await gateway();
    await echo(client, "basic");
    expect(lastBasic).toBe(true);
    await harness?.close();
    harness = undefined;
    process.env.TESSERA_TEST_UPSTREAM_SECRET = "a-wrong-secret-".padEnd(40, "w");
    try {
      const env = { clientSecretFile: undefined, clientSecretEnv: "TESSERA_TEST_UPSTREAM_SECRET" };
      // A wrong secret: the start is refused, naming the endpoint and the OAuth error only.
      const refused = gateway(env);
      const error = (await refused.then(
        () => new Error("started"),
        (e: unknown) => e,
      )) as Error;
      expect(error.message).toMatch(
        new RegExp(`the token endpoint ${tokenUrl} answered HTTP 40\\d \\(invalid_client\\)`),
      );
      expect(error.message).not.toContain("a-wrong-secret");
      process.env.TESSERA_TEST_UPSTREAM_SECRET = SECRET;
      const post = await gateway({ ...env, method: "client_secret_post" });
      expect(textOf(await echo(post, "post"))).toBe("post");
      expect(lastBasic).toBe(false);
    } finally {
      delete process.env.TESSERA_TEST_UPSTREAM_SECRET;
    }
  });

  it("gets a new token shortly before the old one expires", async () => {
    const client = await gateway();
    const before = tokenRequests;
    await echo(client, "a");
    const first = bearer(upstream.seen.at(-1)?.authorization);
    // The provider's tokens live 300 s; replaced by 270 s at the latest.
    offset += 271_000;
    await echo(client, "b");
    const second = bearer(upstream.seen.at(-1)?.authorization);
    expect(tokenRequests - before).toBe(1);
    expect(second).not.toBe(first);
    await echo(client, "c");
    expect(tokenRequests - before).toBe(1);
  });

  it("a 401 gets one new token and one retry; a second 401 stands and no third token is asked for", async () => {
    const client = await gateway();
    await echo(client, "warm");
    const old = bearer(upstream.seen.at(-1)?.authorization) as string;
    revoked.add(old);
    // A token is replaced on a 401 only once it is a second old: the clock says it is.
    offset += 2_000;
    const before = tokenRequests;
    const seen = upstream.seen.length;
    expect(textOf(await echo(client, "after revoke"))).toBe("after revoke");
    expect(tokenRequests - before).toBe(1);
    const tries = upstream.seen.slice(seen).filter((r) => r.method === "tools/call");
    expect(tries.map((r) => r.status)).toEqual([401, 200]);
    expect(bearer(tries[0]?.authorization)).toBe(old);
    expect(bearer(tries[1]?.authorization)).not.toBe(old);

    // Now every token is refused: one refetch, then the 401 is the call's answer.
    refuseAll = true;
    offset += 2_000;
    const echoes = upstream.echoes();
    const again = tokenRequests;
    const original = upstream.seen.length;
    const failed = await echo(client, "refused").then(
      () => undefined,
      (error: unknown) => rpcError(error),
    );
    expect(upstream.seen.slice(original).map((r) => r.status)).toEqual([401, 401]);
    expect(failed?.code).toBe("upstream_failed");
    expect(failed?.message).toContain("HTTP 401");
    expect(tokenRequests - again).toBe(1);
    // At once again: the token is under a second old, so the 401 stands without a token request.
    const young = await echo(client, "refused again").then(
      () => undefined,
      (error: unknown) => rpcError(error),
    );
    expect(young?.code).toBe("upstream_failed");
    expect(tokenRequests - again).toBe(1);
    expect(upstream.echoes()).toBe(echoes);
  });

  it("a token endpoint that is down fails the call before anything is sent, names the endpoint, and is not asked again at once", async () => {
    // Two uses: "warm" spends one; the calls that send nothing give theirs back.
    const fresh = await gateway({}, 2);
    await echo(fresh, "warm");
    tokenDown = true;
    offset += 300_000;
    const before = tokenRequests;
    const seen = upstream.seen.length;
    const echoes = upstream.echoes();
    const failed = await echo(fresh, "no token").then(
      () => undefined,
      (error: unknown) => rpcError(error),
    );
    expect(failed?.code).toBe("upstream_failed");
    expect(failed?.message).toContain(`the token endpoint ${tokenUrl} answered HTTP 503`);
    expect(failed?.message).not.toContain(SECRET);
    expect(upstream.seen.length).toBe(seen);
    expect(upstream.echoes()).toBe(echoes);
    expect(tokenRequests - before).toBe(1);
    // Nothing reached the upstream: the ticket's use came back.
    expect(harness?.audit.events.filter((e) => e.reason === "use_returned")).toHaveLength(1);

    // Within the backoff the endpoint is not asked again; after it, and once it is back, calls run.
    const quick = await echo(fresh, "again").then(
      () => undefined,
      (error: unknown) => rpcError(error),
    );
    expect(quick?.code).toBe("upstream_failed");
    expect(quick?.message).toContain("answered HTTP 503");
    expect(tokenRequests - before).toBe(1);
    tokenDown = false;
    offset += 2_000;
    expect(textOf(await echo(fresh, "back"))).toBe("back");
    expect(tokenRequests - before).toBe(2);
  });

  it("a secret file others may read is refused at start, named, its content never shown", async () => {
    const open = join(dir, "open-secret");
    writeFileSync(open, SECRET, { mode: 0o644 });
    chmodSync(open, 0o644);
    const before = tokenRequests;
    const started = gateway({ clientSecretFile: open });
    await expect(started).rejects.toThrow(
      new RegExp(`the client secret file ${open} is mode 0644: others may read it; chmod 600`),
    );
    await started.catch((error: Error) => expect(error.message).not.toContain(SECRET));
    harness = undefined;
    expect(tokenRequests).toBe(before);
  });
});

describe("the upstream auth config", () => {
  const base = { principals: [PRINCIPALS[0]] };
  const spec = (authSpec: Record<string, unknown>, headers?: Record<string, string>) => ({
    ...base,
    upstreams: {
      up: { url: "https://up.example/mcp", ...(headers ? { headers } : {}), auth: authSpec },
    },
  });
  const good = {
    type: "client_credentials",
    tokenUrl: "https://idp.example/token",
    clientId: "gw",
    clientSecretFile: "secret",
  };

  it("takes a file or an environment variable for the secret, exactly one", () => {
    expect(() => parseGatewayConfig(spec(good))).not.toThrow();
    expect(() =>
      parseGatewayConfig(spec({ ...good, clientSecretFile: undefined, clientSecretEnv: "S" })),
    ).not.toThrow();
    expect(() => parseGatewayConfig(spec({ ...good, clientSecretEnv: "S" }))).toThrow(
      /exactly one of clientSecretFile and clientSecretEnv/,
    );
    expect(() => parseGatewayConfig(spec({ ...good, clientSecretFile: undefined }))).toThrow(
      /exactly one/,
    );
    expect(() => parseGatewayConfig(spec({ ...good, clientSecret: "inline" }))).toThrow(
      /does not match/,
    );
  });

  it("refuses a plain-http token endpoint off loopback, and a static authorization header beside auth", () => {
    expect(() =>
      parseGatewayConfig(spec({ ...good, tokenUrl: "http://idp.example/token" })),
    ).toThrow(/must be https/);
    expect(() =>
      parseGatewayConfig(spec({ ...good, tokenUrl: "http://127.0.0.1:8080/token" })),
    ).not.toThrow();
    expect(() => parseGatewayConfig(spec(good, { Authorization: "Bearer x" }))).toThrow(
      /one credential/,
    );
  });

  it("takes docs/mcp.md's example as written", () => {
    const doc = readFileSync(new URL("../../../docs/mcp.md", import.meta.url), "utf8");
    const section = doc.slice(doc.indexOf("### Upstream credentials"));
    const json = /```json\n([\s\S]*?)```/.exec(section)?.[1] as string;
    const config = parseGatewayConfig({ ...JSON.parse(json), ...base });
    expect(config.upstreams.search).toMatchObject({
      auth: { type: "client_credentials", clientSecretFile: "search-client-secret" },
    });
  });

  it("resolves the secret file against the config's folder", () => {
    const file = join(dir, "gateway.json");
    writeFileSync(file, JSON.stringify(spec(good)));
    const loaded = loadGatewayConfig(file).upstreams.up as { auth?: { clientSecretFile?: string } };
    expect(loaded.auth?.clientSecretFile).toBe(join(dir, "secret"));
  });
});
