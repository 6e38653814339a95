import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openStores, type StoreBundle } from "@tessera/core";
import { decodeJwt, exportSPKI, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { JwtIdentityInput } from "../src/identity/config.js";
import { listen, type RunningServer } from "../src/listen.js";
import { type SigningKey, signingKey, startIssuer, type TestIssuer } from "./support/oidc.js";
import { call, principal, send, ticket } from "./support/service.js";

/**
 * JWT access tokens from a real OpenID provider (`oidc-provider`, client-credentials grant,
 * resource indicators) against the real service: the mapped principal decides, and every way
 * a token can be wrong is refused with the status and the log line naming what failed, never
 * the token. Runs in order: the key rotation and the outage come last.
 */
const AUDIENCE = "https://tessera.test/";
const SECRET = "client-secret-".padEnd(48, "x");
const claims = (ns: string | undefined, role = "agent") => ({
  ...(ns === undefined ? {} : { tessera_ns: ns }),
  tessera_authority: "host",
  tessera_owner: "alice",
  tessera_role: role,
});
const CLIENTS = [
  { id: "asker", secret: SECRET, claims: claims("team") },
  { id: "stranger", secret: SECRET, claims: claims("team") },
  { id: "host", secret: SECRET, claims: claims("team", "issuer") },
  { id: "nameless", secret: SECRET, claims: claims(undefined) },
  { id: "admin", secret: SECRET, claims: claims("team", "admin") },
  // Two seconds, not one: `exp` counts whole seconds from a truncated `iat`, so a one-second
  // token minted late in its second lived a few milliseconds (seen failing its first use).
  { id: "brief", secret: SECRET, claims: claims("team"), ttl: 2 },
];
const staticAgent = principal("static-token-alice-identity", {
  namespaceId: "team",
  actor: "alice",
  authority: "host",
});

let k1: SigningKey;
let issuer: TestIssuer;
let stores: StoreBundle;
let server: RunningServer;
const lines: Record<string, unknown>[] = [];
const tokens: string[] = [];

function identityConfig(over: Partial<JwtIdentityInput> = {}): JwtIdentityInput {
  return {
    issuer: issuer.issuer,
    audience: AUDIENCE,
    jwksUri: issuer.jwksUri,
    algorithms: ["ES256"],
    clockSkewSeconds: 0,
    jwksRefetchSeconds: 1,
    claims: {
      namespaceId: { claim: "tessera_ns" },
      actor: { claim: "client_id" },
      authority: { claim: "tessera_authority" },
      owner: { claim: "tessera_owner" },
      role: { claim: "tessera_role" },
    },
    ...over,
  };
}

async function token(client: string, resource = AUDIENCE): Promise<string> {
  const minted = await issuer.token(client, resource);
  tokens.push(minted);
  return minted;
}

/** The refusal logged for the last request: the reason, and the message naming it. */
function lastRefusal(): { reason: unknown; msg: unknown } {
  const line = lines.findLast((l) => typeof l.msg === "string" && l.msg.includes("refused"));
  return {
    reason: (line?.identity as { reason?: unknown } | undefined)?.reason,
    msg: line?.msg,
  };
}

async function refusedWith(bearer: string, status: number, reason: string, msg: RegExp) {
  const before = lines.length;
  const answer = await call(server.url, "GET", "/v1/tools", { token: bearer });
  expect(answer.status).toBe(status);
  expect(lines.length).toBeGreaterThan(before);
  const logged = lastRefusal();
  expect(logged.reason).toBe(reason);
  expect(logged.msg).toMatch(msg);
  return answer;
}

beforeAll(async () => {
  k1 = await signingKey("k1");
  issuer = await startIssuer(CLIENTS, [k1]);
  stores = await openStores(`sqlite:${join(mkdtempSync(join(tmpdir(), "identity-")), "t.db")}`);
  await stores.grants.add(ticket("t-bob", "bob"));
  server = await listen({
    stores,
    principals: [staticAgent.config],
    identity: identityConfig(),
    port: 0,
    log: { level: "info", stream: { write: (line) => lines.push(JSON.parse(line)) } },
  });
}, 30_000);

afterAll(async () => {
  await server?.close();
  await stores?.close();
  await issuer?.close();
});

describe("JWT access tokens from the host's identity provider", () => {
  it("a token's mapped principal decides: allowed for the grant's subject, denied for another", async () => {
    const allowed = await call(server.url, "POST", "/v1/authorize", {
      token: await token("asker"),
      body: send("bob", "call-asker-1"),
    });
    expect(allowed).toMatchObject({ status: 200, body: { status: "allowed", grantId: "t-bob" } });
    const denied = await call(server.url, "POST", "/v1/authorize", {
      token: await token("stranger"),
      body: send("bob", "call-stranger-1"),
    });
    expect(denied).toMatchObject({ status: 200, body: { status: "denied" } });
  });

  it("the mapped role decides the routes: issuer tokens list grants, agent tokens may not", async () => {
    const issuerToken = await token("host");
    expect((await call(server.url, "GET", "/v1/grants", { token: issuerToken })).status).toBe(200);
    const agentOnIssuerRoute = await call(server.url, "GET", "/v1/grants", {
      token: await token("asker"),
    });
    expect(agentOnIssuerRoute.status).toBe(403);
    expect(agentOnIssuerRoute.body.error.message).toMatch(/issuer tokens/);
  });

  it("static tokens keep working beside the issuer's", async () => {
    expect((await call(server.url, "GET", "/v1/tools", { token: staticAgent.token })).status).toBe(
      200,
    );
  });

  it("claims that do not map are 403 with the reason logged, never a default principal", async () => {
    const nameless = await refusedWith(
      await token("nameless"),
      403,
      "unmapped_claims",
      /claim tessera_ns \(namespaceId\) is missing/,
    );
    expect(nameless.body.error.code).toBe("forbidden");
    await refusedWith(await token("admin"), 403, "unmapped_claims", /neither agent nor issuer/);
  });

  it("a token minted for another resource is refused: wrong audience", async () => {
    const other = await token("asker", "https://elsewhere.test/");
    expect(decodeJwt(other).aud).toBe("https://elsewhere.test/");
    const answer = await refusedWith(other, 401, "wrong_audience", /another audience/);
    expect(answer.headers.get("www-authenticate")).toMatch(/error="invalid_token"/);
  });

  it("a token of another issuer is refused, even signed with a key this issuer publishes", async () => {
    const impostor = await startIssuer(CLIENTS, [k1]);
    try {
      const foreign = await impostor.token("asker", AUDIENCE);
      tokens.push(foreign);
      await refusedWith(foreign, 401, "wrong_issuer", /another issuer/);
    } finally {
      await impostor.close();
    }
  });

  it("an expired token is refused", async () => {
    const brief = await token("brief");
    expect((await call(server.url, "GET", "/v1/tools", { token: brief })).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 2100));
    await refusedWith(brief, 401, "expired", /expired/);
  });

  it("alg none is refused", async () => {
    const [, payload] = (await token("asker")).split(".");
    const header = Buffer.from(JSON.stringify({ alg: "none", typ: "at+jwt" })).toString(
      "base64url",
    );
    await refusedWith(`${header}.${payload}.`, 401, "algorithm_not_allowed", /algorithm/);
  });

  it("an HS256 token keyed by the issuer's public key is refused (no HS/RS confusion)", async () => {
    const payload = decodeJwt(await token("asker"));
    const pem = await exportSPKI(k1.publicKey);
    const forged = await new SignJWT(payload)
      .setProtectedHeader({ alg: "HS256", typ: "at+jwt", kid: "k1" })
      .sign(new TextEncoder().encode(pem));
    await refusedWith(forged, 401, "algorithm_not_allowed", /algorithm/);
  });

  it("a token whose claims were changed after signing is refused: bad signature", async () => {
    const [header, payload, signature] = (await token("stranger")).split(".");
    const claimsRead = JSON.parse(Buffer.from(payload as string, "base64url").toString("utf8"));
    const changed = Buffer.from(JSON.stringify({ ...claimsRead, client_id: "asker" })).toString(
      "base64url",
    );
    await refusedWith(`${header}.${changed}.${signature}`, 401, "bad_signature", /signature/);
  });

  it("a token of 8 KiB (a provider's large groups claim) is read whole and accepted", async () => {
    const payload = decodeJwt(await token("asker"));
    const groups = Array.from({ length: 400 }, (_, i) => `group-with-a-long-name-${i}`);
    const large = await new SignJWT({ ...payload, groups })
      .setProtectedHeader({ alg: "ES256", typ: "at+jwt", kid: k1.kid })
      .sign(k1.privateKey);
    expect(large.length).toBeGreaterThan(8_192);
    expect((await call(server.url, "GET", "/v1/tools", { token: large })).status).toBe(200);
  });

  it("a rotated key: the new kid is fetched, the removed one refused, even once cached", async () => {
    const before = await token("asker");
    // Verified and cached under k1 before the rotation: the reload that drops k1 drops it.
    expect((await call(server.url, "GET", "/v1/tools", { token: before })).status).toBe(200);
    expect((await call(server.url, "GET", "/v1/tools", { token: before })).status).toBe(200);
    const k2 = await signingKey("k2");
    issuer.rotate([k2]);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const fetched = issuer.jwksRequests();
    const after = await token("asker");
    expect((await call(server.url, "GET", "/v1/tools", { token: after })).status).toBe(200);
    expect(issuer.jwksRequests()).toBe(fetched + 1);
    await refusedWith(before, 401, "unknown_key", /not one of the issuer's/);
  });

  it("made-up kids cost the issuer at most one fetch per interval", async () => {
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const fetched = issuer.jwksRequests();
    const payload = decodeJwt(await token("asker"));
    for (let i = 0; i < 10; i++) {
      const stray = await signingKey(`stray-${i}`);
      const forged = await new SignJWT(payload)
        .setProtectedHeader({ alg: "ES256", kid: stray.kid })
        .sign(stray.privateKey);
      await refusedWith(forged, 401, "unknown_key", /not one of the issuer's/);
    }
    expect(issuer.jwksRequests() - fetched).toBeLessThanOrEqual(1);
  });

  it("the JWKS endpoint down: cached keys keep working, an unknown kid fails closed", async () => {
    const cached = await token("asker");
    const payload = decodeJwt(cached);
    issuer.down(true);
    try {
      await new Promise((resolve) => setTimeout(resolve, 1100));
      expect((await call(server.url, "GET", "/v1/tools", { token: cached })).status).toBe(200);
      const k3 = await signingKey("k3");
      const unknown = await new SignJWT(payload)
        .setProtectedHeader({ alg: "ES256", kid: "k3" })
        .sign(k3.privateKey);
      await refusedWith(unknown, 401, "unknown_key", /not one of the issuer's/);
      expect(
        lines.some(
          (l) => typeof l.msg === "string" && /keys could not be loaded: .*503/.test(l.msg),
        ),
      ).toBe(true);
      expect((await call(server.url, "GET", "/v1/tools", { token: cached })).status).toBe(200);
    } finally {
      issuer.down(false);
    }
  });

  it("no token is ever written to the log", () => {
    const text = JSON.stringify(lines);
    for (const minted of tokens) {
      expect(text).not.toContain(minted);
      expect(text).not.toContain(minted.split(".")[2]);
    }
  });
});
