import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isTesseraError, openStores, type StoreBundle } from "@tessera/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type JwtIdentityInput, parseJwtIdentity } from "../src/identity/config.js";
import { JwtVerifier } from "../src/identity/verify.js";
import { listen, type RunningServer } from "../src/listen.js";
import { signingKey, startIssuer, type TestIssuer } from "./support/oidc.js";
import { call, principal, send, ticket } from "./support/service.js";

/**
 * A JWT-only service: no static principal, every caller brings the identity provider's access
 * token (a real `oidc-provider`). The mapped principal decides, a static token is refused, a
 * reused token is verified once, and the identity config can be replaced while it runs (the
 * cache forgotten). A service with neither way in does not start.
 */
const AUDIENCE = "https://tessera.test/";
const SECRET = "client-secret-".padEnd(48, "j");
const CLIENTS = [
  { id: "asker", secret: SECRET, claims: { tessera_ns: "team", tessera_owner: "alice" } },
  { id: "stranger", secret: SECRET, claims: { tessera_ns: "team", tessera_owner: "alice" } },
  { id: "nameless", secret: SECRET, claims: { tessera_owner: "alice" } },
];
const staticAgent = principal("static-token-jwt-only", {
  namespaceId: "team",
  actor: "asker",
  authority: "host",
  owner: "alice",
});

let issuer: TestIssuer;
let stores: StoreBundle;
let server: RunningServer;
let verifier: JwtVerifier;

function identityConfig(over: Partial<JwtIdentityInput> = {}): JwtIdentityInput {
  return {
    issuer: issuer.issuer,
    audience: AUDIENCE,
    jwksUri: issuer.jwksUri,
    algorithms: ["ES256"],
    clockSkewSeconds: 0,
    claims: {
      namespaceId: { claim: "tessera_ns" },
      actor: { claim: "client_id" },
      authority: { value: "host" },
      owner: { claim: "tessera_owner" },
    },
    ...over,
  };
}

beforeAll(async () => {
  issuer = await startIssuer(CLIENTS, [await signingKey("jwt-only-1")]);
  stores = await openStores(`sqlite:${join(mkdtempSync(join(tmpdir(), "jwt-only-")), "t.db")}`);
  await stores.grants.add(ticket("t-jwt-bob", "bob"));
  await stores.grants.add(ticket("t-jwt-carol", "carol"));
  // Built by the host and handed over, so the test can read its counts.
  verifier = new JwtVerifier(parseJwtIdentity(identityConfig()));
  server = await listen({ stores, principals: [], identity: verifier, port: 0, log: false });
}, 30_000);

afterAll(async () => {
  await server?.close();
  await stores?.close();
  await issuer?.close();
});

describe("a JWT-only service (no static principal)", () => {
  it("decides for the token's mapped principal: allowed with its grant, denied without", async () => {
    const allowed = await call(server.url, "POST", "/v1/authorize", {
      token: await issuer.token("asker", AUDIENCE),
      body: send("bob", "jwt-only-asker-1"),
    });
    expect(allowed).toMatchObject({
      status: 200,
      body: { status: "allowed", grantId: "t-jwt-bob" },
    });
    const denied = await call(server.url, "POST", "/v1/authorize", {
      token: await issuer.token("stranger", AUDIENCE),
      body: send("bob", "jwt-only-stranger-1"),
    });
    expect(denied).toMatchObject({ status: 200, body: { status: "denied" } });
    const unmapped = await call(server.url, "GET", "/v1/tools", {
      token: await issuer.token("nameless", AUDIENCE),
    });
    expect(unmapped.status).toBe(403);
  });

  it("refuses a static token 401: no principal holds it", async () => {
    const answer = await call(server.url, "GET", "/v1/tools", { token: staticAgent.token });
    expect(answer.status).toBe(401);
    expect(answer.body.error.code).toBe("unauthenticated");
    expect(answer.headers.get("www-authenticate")).toMatch(/^Bearer/);
  });

  it("verifies a reused token once across requests", async () => {
    const token = await issuer.token("asker", AUDIENCE);
    const before = verifier.stats;
    for (let i = 0; i < 3; i++) {
      expect((await call(server.url, "GET", "/v1/tools", { token })).status).toBe(200);
    }
    const after = verifier.stats;
    expect(after.verified - before.verified).toBe(1);
    expect(after.cacheHits - before.cacheHits).toBe(2);
  });

  it("takes an empty principals set on reload: the identity provider is still a way in", () => {
    expect(server.reloadPrincipals(() => [])).toEqual({ reloaded: true, count: 0 });
  });

  it("reloads the identity config: the new mapping decides the next request, the cache forgotten", async () => {
    const token = await issuer.token("asker", AUDIENCE);
    expect((await call(server.url, "GET", "/v1/tools", { token })).status).toBe(200);
    // The same token now maps to another namespace, where asker holds no grant.
    const remapped = server.reloadIdentity(() =>
      identityConfig({
        claims: { ...identityConfig().claims, namespaceId: { value: "elsewhere" } },
      }),
    );
    expect(remapped).toEqual({ reloaded: true, issuer: issuer.issuer });
    expect(verifier.stats.cached).toBe(0);
    const denied = await call(server.url, "POST", "/v1/authorize", {
      token,
      body: send("carol", "jwt-only-asker-remapped"),
    });
    expect(denied).toMatchObject({ status: 200, body: { status: "denied" } });

    expect(
      server.reloadIdentity(() => identityConfig({ audience: "https://renamed.test/" })),
    ).toMatchObject({ reloaded: true });
    expect((await call(server.url, "GET", "/v1/tools", { token })).status).toBe(401);

    // A config that does not check leaves the one in force.
    // HS256 is outside the type on purpose: a file on disk can say anything.
    const bad = server.reloadIdentity(() => ({
      ...identityConfig(),
      algorithms: ["HS256"] as unknown as ["ES256"],
    }));
    expect(bad).toMatchObject({ reloaded: false, code: "invalid_config" });
    expect(bad.reloaded === false && bad.message).toMatch(/algorithms/);
    expect((await call(server.url, "GET", "/v1/tools", { token })).status).toBe(401);
    const renamed = await issuer.token("asker", "https://renamed.test/");
    expect((await call(server.url, "GET", "/v1/tools", { token: renamed })).status).toBe(200);
  });
});

describe("a service with no way in", () => {
  it("does not start without principals or an identity provider, and names both", async () => {
    const error = await listen({ stores, principals: [], port: 0, log: false }).catch((e) => e);
    expect(isTesseraError(error, "invalid_config")).toBe(true);
    expect(error.message).toMatch(/at least one principal .* or an identity provider/);
  });

  it("keeps its principals when a reload would leave none and it has no identity provider", async () => {
    const running = await listen({ stores, principals: [staticAgent.config], port: 0, log: false });
    try {
      expect(running.reloadPrincipals(() => [])).toMatchObject({
        reloaded: false,
        count: 1,
        code: "invalid_config",
      });
      expect(running.reloadIdentity(() => identityConfig())).toMatchObject({
        reloaded: false,
        message: expect.stringMatching(/started without an identity provider/),
      });
      const answer = await call(running.url, "GET", "/v1/tools", { token: staticAgent.token });
      expect(answer.status).toBe(200);
    } finally {
      await running.close();
    }
  });
});
