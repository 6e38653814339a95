import { decodeJwt } from "jose";
import { afterEach, describe, expect, it } from "vitest";
import { type JwtIdentityInput, parseJwtIdentity } from "../src/identity/config.js";
import { JwtVerifier, type JwtVerifierOptions } from "../src/identity/verify.js";
import { signingKey, startIssuer, type TestIssuer } from "./support/oidc.js";

/**
 * The verifier's cache of verified tokens, against a real OpenID provider and a clock the test
 * moves: a reused token is verified once, and a cached one is still refused the moment it
 * would be refused uncached (expiry, a removed key, a new configuration). A refused token is
 * never kept. Each test has its own issuer: key rotations never leak into another test.
 */
const AUDIENCE = "https://tessera.test/";
const SECRET = "client-secret-".padEnd(48, "c");
const CLIENTS = [
  { id: "asker", secret: SECRET, claims: { tessera_ns: "team" } },
  { id: "other", secret: SECRET, claims: { tessera_ns: "team" } },
  { id: "third", secret: SECRET, claims: { tessera_ns: "team" } },
  { id: "nameless", secret: SECRET, claims: {} },
];

const issuers: TestIssuer[] = [];
afterEach(async () => {
  await Promise.all(issuers.splice(0).map((i) => i.close()));
});

/** A test clock starting at the real time (tokens are minted with it), moved by hand. */
function clock() {
  let at = Date.now();
  return {
    now: () => at,
    advance: (seconds: number) => {
      at += seconds * 1000;
    },
  };
}

async function setup(over: Partial<JwtIdentityInput> = {}, options: JwtVerifierOptions = {}) {
  const k1 = await signingKey("cache-k1");
  const issuer = await startIssuer(CLIENTS, [k1]);
  issuers.push(issuer);
  const time = clock();
  const config: JwtIdentityInput = {
    issuer: issuer.issuer,
    audience: AUDIENCE,
    jwksUri: issuer.jwksUri,
    algorithms: ["ES256"],
    clockSkewSeconds: 0,
    jwksRefetchSeconds: 1,
    jwksMaxAgeSeconds: 60,
    claims: {
      namespaceId: { claim: "tessera_ns" },
      actor: { claim: "client_id" },
      authority: { value: "host" },
    },
    ...over,
  };
  const verifier = new JwtVerifier(parseJwtIdentity(config), { now: time.now, ...options });
  return { issuer, verifier, time, config, k1 };
}

describe("the verified-token cache", () => {
  it("verifies a reused token once; the later uses are answered from the cache", async () => {
    const { issuer, verifier } = await setup();
    const token = await issuer.token("asker", AUDIENCE);
    const first = await verifier.verify(token);
    expect(first).toMatchObject({ ok: true, identity: { namespaceId: "team", actor: "asker" } });
    expect(await verifier.verify(token)).toEqual(first);
    expect(await verifier.verify(token)).toEqual(first);
    expect(verifier.stats).toEqual({ verified: 1, cacheHits: 2, cached: 1 });
  });

  it("never keeps a refused token: each use is verified again", async () => {
    const { issuer, verifier } = await setup();
    const elsewhere = await issuer.token("asker", "https://elsewhere.test/");
    const nameless = await issuer.token("nameless", AUDIENCE);
    for (let i = 0; i < 2; i++) {
      expect(await verifier.verify(elsewhere)).toMatchObject({
        ok: false,
        reason: "wrong_audience",
      });
      expect(await verifier.verify(nameless)).toMatchObject({
        ok: false,
        status: 403,
        reason: "unmapped_claims",
      });
    }
    expect(verifier.stats).toEqual({ verified: 4, cacheHits: 0, cached: 0 });
  });

  it("refuses a cached token once it expires, without a signature to check", async () => {
    const { issuer, verifier, time } = await setup();
    const token = await issuer.token("asker", AUDIENCE);
    const exp = decodeJwt(token).exp as number;
    expect((await verifier.verify(token)).ok).toBe(true);
    time.advance(exp - Math.floor(time.now() / 1000) - 1);
    expect((await verifier.verify(token)).ok).toBe(true);
    time.advance(1);
    expect(await verifier.verify(token)).toMatchObject({
      ok: false,
      status: 401,
      reason: "expired",
    });
    expect(verifier.stats).toMatchObject({ verified: 1, cacheHits: 1 });
  });

  it("judges a cached token's exp with the configured skew, as an uncached one", async () => {
    const { issuer, verifier, time } = await setup({ clockSkewSeconds: 30 });
    const token = await issuer.token("asker", AUDIENCE);
    const exp = decodeJwt(token).exp as number;
    expect((await verifier.verify(token)).ok).toBe(true);
    time.advance(exp - Math.floor(time.now() / 1000) + 29);
    expect((await verifier.verify(token)).ok).toBe(true);
    time.advance(1);
    expect(await verifier.verify(token)).toMatchObject({ ok: false, reason: "expired" });
  });

  it("drops a token cached before its key was removed, at the refresh that removed it", async () => {
    const { issuer, verifier, time, k1 } = await setup();
    const k1Token = await issuer.token("asker", AUDIENCE);
    expect((await verifier.verify(k1Token)).ok).toBe(true);

    // A rotation that keeps k1 beside k2: k1's tokens stay cached through the reload.
    const k2 = await signingKey("cache-k2");
    issuer.rotate([k2, k1]);
    time.advance(2);
    const k2Token = await issuer.token("other", AUDIENCE);
    expect((await verifier.verify(k2Token)).ok).toBe(true);
    const fetchedWithK1 = issuer.jwksRequests();
    expect((await verifier.verify(k1Token)).ok).toBe(true);
    expect(verifier.stats).toMatchObject({ verified: 2, cacheHits: 1, cached: 2 });

    // k1 removed: the reload that a k3 token triggers drops k1's cached token at once.
    const k3 = await signingKey("cache-k3");
    issuer.rotate([k3]);
    time.advance(2);
    expect((await verifier.verify(await issuer.token("third", AUDIENCE))).ok).toBe(true);
    expect(issuer.jwksRequests()).toBe(fetchedWithK1 + 1);
    expect(verifier.stats.cached).toBe(1);
    expect(await verifier.verify(k1Token)).toMatchObject({
      ok: false,
      status: 401,
      reason: "unknown_key",
    });
    expect(await verifier.verify(k2Token)).toMatchObject({ ok: false, reason: "unknown_key" });
  });

  it("notices a removed key at the max-age refresh even when every request is a cache hit", async () => {
    const { issuer, verifier, time } = await setup();
    const token = await issuer.token("asker", AUDIENCE);
    expect((await verifier.verify(token)).ok).toBe(true);
    issuer.rotate([await signingKey("cache-k9")]);
    time.advance(61);
    // Stale keys are refreshed beside the request, never in its way: this hit still answers.
    expect((await verifier.verify(token)).ok).toBe(true);
    let verdict = await verifier.verify(token);
    for (let waited = 0; verdict.ok && waited < 5000; waited += 20) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      verdict = await verifier.verify(token);
    }
    expect(verdict).toMatchObject({ ok: false, reason: "unknown_key" });
  });

  it("forgets every verified token when the configuration changes", async () => {
    const { issuer, verifier, config } = await setup();
    const token = await issuer.token("asker", AUDIENCE);
    expect((await verifier.verify(token)).ok).toBe(true);
    verifier.reconfigure(parseJwtIdentity({ ...config, audience: "https://renamed.test/" }));
    expect(verifier.stats.cached).toBe(0);
    expect(await verifier.verify(token)).toMatchObject({ ok: false, reason: "wrong_audience" });
    verifier.reconfigure(
      parseJwtIdentity({ ...config, claims: { ...config.claims, namespaceId: { value: "b" } } }),
    );
    expect(await verifier.verify(token)).toMatchObject({
      ok: true,
      identity: { namespaceId: "b", actor: "asker" },
    });
    expect(verifier.stats).toMatchObject({ verified: 3, cacheHits: 0 });
  });

  it("is bounded: past its size the least recently used token is verified again", async () => {
    const { issuer, verifier } = await setup({}, { cacheEntries: 2 });
    const [a, b, c] = await Promise.all(
      ["asker", "other", "third"].map((client) => issuer.token(client, AUDIENCE)),
    );
    for (const token of [a, b, a, c] as string[])
      expect((await verifier.verify(token)).ok).toBe(true);
    // a was used after b, so b went when c came.
    expect(verifier.stats).toEqual({ verified: 3, cacheHits: 1, cached: 2 });
    expect((await verifier.verify(a as string)).ok).toBe(true);
    expect((await verifier.verify(b as string)).ok).toBe(true);
    expect(verifier.stats).toEqual({ verified: 4, cacheHits: 2, cached: 2 });
  });

  it("verifies every time with cacheEntries 0", async () => {
    const { issuer, verifier } = await setup({}, { cacheEntries: 0 });
    const token = await issuer.token("asker", AUDIENCE);
    for (let i = 0; i < 3; i++) expect((await verifier.verify(token)).ok).toBe(true);
    expect(verifier.stats).toEqual({ verified: 3, cacheHits: 0, cached: 0 });
  });
});
