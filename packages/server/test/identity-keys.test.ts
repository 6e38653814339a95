import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { SignJWT } from "jose";
import { afterEach, describe, expect, it } from "vitest";
import { type JwtIdentityInput, parseJwtIdentity } from "../src/identity/config.js";
import { CachedKeySet, MAX_JWKS_BYTES } from "../src/identity/keys.js";
import { JwtVerifier } from "../src/identity/verify.js";
import { type SigningKey, signingKey } from "./support/oidc.js";

/**
 * Loading the issuer's keys against a JWKS endpoint the test controls: a body too large or too
 * slow is a failed load (the keys held stay in force), and failed loads are limited like any
 * other, so an issuer down at start is not asked again by every request.
 */
const ISSUER = "https://id.test/";
const AUDIENCE = "https://tessera.test/";

type Mode =
  | "normal"
  | "down"
  /** 200 with a valid JWKS padded past the cap, streamed without a content-length. */
  | "huge-streamed"
  /** 200 announcing a content-length past the cap. */
  | "huge-declared"
  /** 200, then a byte of the body every 50 ms, never finishing. */
  | "dribble";

interface JwksEndpoint {
  readonly url: string;
  mode: Mode;
  keys: readonly SigningKey[];
  requests: number;
  /** Body bytes the last answer got written before the client went away (or it ended). */
  lastSent: number;
  close(): Promise<void>;
}

const HUGE_BYTES = 8 * MAX_JWKS_BYTES;

async function jwksEndpoint(keys: readonly SigningKey[]): Promise<JwksEndpoint> {
  const timers = new Set<NodeJS.Timeout>();
  const endpoint: JwksEndpoint = {
    url: "",
    mode: "normal",
    keys,
    requests: 0,
    lastSent: 0,
    close: () =>
      new Promise<void>((resolve) => {
        for (const timer of timers) clearInterval(timer);
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  const jwks = () => ({ keys: endpoint.keys.map((k) => k.publicJwk) });
  const server: Server = createServer((_req, res) => {
    endpoint.requests++;
    endpoint.lastSent = 0;
    switch (endpoint.mode) {
      case "normal":
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(jwks()));
        return;
      case "down":
        res.writeHead(503).end();
        return;
      case "huge-declared":
        res.writeHead(200, { "content-length": String(2 * MAX_JWKS_BYTES) });
        res.write("{");
        return;
      case "huge-streamed":
        streamHuge(res, JSON.stringify(jwks()), (sent) => {
          endpoint.lastSent = sent;
        });
        return;
      case "dribble": {
        res.writeHead(200, { "content-type": "application/json" });
        res.write('{"keys":[');
        const timer = setInterval(() => res.write(" "), 50);
        timers.add(timer);
        res.on("close", () => {
          clearInterval(timer);
          timers.delete(timer);
        });
      }
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return Object.assign(endpoint, {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks`,
  });
}

/** A valid JWKS (the real keys plus one padded member) of `HUGE_BYTES`, written with backpressure. */
function streamHuge(res: ServerResponse, real: string, sent: (bytes: number) => void): void {
  res.writeHead(200, { "content-type": "application/json" });
  const head = `${real.slice(0, -2)},{"kty":"EC","crv":"P-256","use":"enc","x":"`;
  const tail = '"}]}';
  const chunk = "A".repeat(64 * 1024);
  let written = 0;
  const write = (text: string) => {
    written += text.length;
    sent(written);
    return res.write(text);
  };
  let closed = false;
  res.on("close", () => {
    closed = true;
  });
  const pump = () => {
    if (written === 0) write(head);
    while (!closed && written + chunk.length < HUGE_BYTES) {
      if (!write(chunk)) {
        res.once("drain", pump);
        return;
      }
    }
    if (!closed) {
      write(tail);
      res.end();
    }
  };
  pump();
}

const endpoints: JwksEndpoint[] = [];
afterEach(async () => {
  await Promise.all(endpoints.splice(0).map((e) => e.close()));
});

async function setup(mode: Mode, over: Partial<JwtIdentityInput> = {}) {
  const k1 = await signingKey("keys-k1");
  const endpoint = await jwksEndpoint([k1]);
  endpoints.push(endpoint);
  endpoint.mode = mode;
  const loadErrors: unknown[] = [];
  let at = Date.now();
  const verifier = new JwtVerifier(
    parseJwtIdentity({
      issuer: ISSUER,
      audience: AUDIENCE,
      jwksUri: endpoint.url,
      algorithms: ["ES256"],
      jwksRefetchSeconds: 30,
      claims: { namespaceId: { value: "team" }, authority: { value: "host" } },
      ...over,
    }),
    {
      now: () => at,
      // Every token is verified, so every request reaches the key set.
      cacheEntries: 0,
      onKeyLoadError: (error) => loadErrors.push(error),
    },
  );
  const advance = (seconds: number) => {
    at += seconds * 1000;
  };
  return { k1, endpoint, verifier, loadErrors, advance };
}

/** A token signed by `key`, naming its kid unless `withKid` is false. */
function sign(key: SigningKey, withKid = true): Promise<string> {
  return new SignJWT({ sub: "agent-7" })
    .setProtectedHeader(withKid ? { alg: "ES256", kid: key.kid } : { alg: "ES256" })
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .setExpirationTime("5m")
    .sign(key.privateKey);
}

describe("JWKS body limits", () => {
  it("a JWKS past the cap is refused unread, and the keys held stay in force", async () => {
    const { k1, endpoint, verifier, loadErrors, advance } = await setup("normal");
    expect(await verifier.verify(await sign(k1))).toMatchObject({ ok: true });

    endpoint.mode = "huge-streamed";
    const k2 = await signingKey("keys-k2");
    endpoint.keys = [k1, k2];
    advance(31);
    // k2 is in the huge set: read whole, it would verify; refused, it is an unknown key.
    expect(await verifier.verify(await sign(k2))).toMatchObject({ reason: "unknown_key" });
    expect(String(loadErrors.at(-1))).toMatch(/larger than 1048576 bytes/);
    // The client hung up soon after the cap, not at the end of the 8 MiB.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(endpoint.lastSent).toBeLessThan(HUGE_BYTES / 2);
    expect(await verifier.verify(await sign(k1))).toMatchObject({ ok: true });

    endpoint.mode = "huge-declared";
    advance(31);
    expect(await verifier.verify(await sign(k2))).toMatchObject({ reason: "unknown_key" });
    expect(String(loadErrors.at(-1))).toMatch(/larger than/);
    expect(await verifier.verify(await sign(k1))).toMatchObject({ ok: true });
  });

  it("the timeout covers the body: a JWKS dribbled byte by byte fails the load in time", async () => {
    const { k1, loadErrors, verifier } = await setup("dribble", { jwksTimeoutMs: 300 });
    const started = Date.now();
    expect(await verifier.verify(await sign(k1))).toMatchObject({ reason: "keys_unavailable" });
    expect(Date.now() - started).toBeLessThan(2000);
    expect(loadErrors).toHaveLength(1);
  });
});

describe("JWKS refetch limit", () => {
  it("the endpoint down at start: N requests make one fetch per interval, each failing closed", async () => {
    const { k1, endpoint, verifier, loadErrors, advance } = await setup("down");
    const token = await sign(k1);
    for (let i = 0; i < 50; i++) {
      expect(await verifier.verify(token)).toMatchObject({ reason: "keys_unavailable" });
    }
    expect(endpoint.requests).toBe(1);
    expect(loadErrors).toHaveLength(1);

    // Requests racing for the next attempt share it.
    advance(31);
    const racing = await Promise.all(Array.from({ length: 20 }, () => verifier.verify(token)));
    expect(racing.every((v) => !v.ok && v.reason === "keys_unavailable")).toBe(true);
    expect(endpoint.requests).toBe(2);

    endpoint.mode = "normal";
    expect(await verifier.verify(token)).toMatchObject({ reason: "keys_unavailable" });
    expect(endpoint.requests).toBe(2);
    advance(31);
    expect(await verifier.verify(token)).toMatchObject({ ok: true });
    expect(endpoint.requests).toBe(3);
  });

  it("any load source: a failing load (a jwksFile gone bad) is tried once per interval", async () => {
    let loads = 0;
    let at = 0;
    const keys = new CachedKeySet({
      load: async () => {
        loads++;
        throw new Error("no JWKS file");
      },
      refetchMs: 30_000,
      maxAgeMs: 600_000,
      now: () => at,
    });
    const k1 = await signingKey("keys-k1");
    const token = { payload: "", signature: "", protected: "" };
    for (let i = 0; i < 50; i++) {
      await expect(keys.key({ alg: "ES256", kid: k1.kid }, token)).rejects.toThrow(
        /cannot be read/,
      );
    }
    expect(loads).toBe(1);
    at += 30_000;
    await expect(keys.key({ alg: "ES256", kid: k1.kid }, token)).rejects.toThrow(/cannot be read/);
    expect(loads).toBe(2);
  });
});

describe("tokens without a kid", () => {
  it("two keys of one type published (a rotation's overlap): the key that verifies is used", async () => {
    const { k1, endpoint, verifier } = await setup("normal");
    const k2 = await signingKey("keys-k2");
    endpoint.keys = [k1, k2];
    expect(await verifier.verify(await sign(k2, false))).toMatchObject({
      ok: true,
      identity: { actor: "agent-7" },
    });
    expect(await verifier.verify(await sign(k1, false))).toMatchObject({ ok: true });
    const stranger = await signingKey("keys-stranger");
    expect(await verifier.verify(await sign(stranger, false))).toMatchObject({
      ok: false,
      reason: "bad_signature",
    });
    expect(endpoint.requests).toBe(1);
  });
});

describe("scopes", () => {
  it("scp as a space-separated string (Microsoft Entra ID) reads like scope", async () => {
    const { k1, verifier } = await setup("normal", { requiredScope: "tessera:call" });
    const withClaims = (claims: Record<string, unknown>) =>
      new SignJWT({ sub: "agent-7", ...claims })
        .setProtectedHeader({ alg: "ES256", kid: k1.kid })
        .setIssuer(ISSUER)
        .setAudience(AUDIENCE)
        .setExpirationTime("5m")
        .sign(k1.privateKey);
    for (const claims of [
      { scp: "openid tessera:call" },
      { scp: ["openid", "tessera:call"] },
      { scope: "openid tessera:call" },
    ]) {
      expect(await verifier.verify(await withClaims(claims)), JSON.stringify(claims)).toMatchObject(
        { ok: true, identity: { scopes: ["openid", "tessera:call"] } },
      );
    }
    expect(await verifier.verify(await withClaims({ scp: "openid tessera:other" }))).toMatchObject({
      ok: false,
      status: 403,
      reason: "insufficient_scope",
    });
  });
});
