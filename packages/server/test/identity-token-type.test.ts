import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openStores, type StoreBundle } from "@tessera/core";
import { decodeJwt, decodeProtectedHeader, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type JwtIdentityInput, parseJwtIdentity } from "../src/identity/config.js";
import { JwtVerifier } from "../src/identity/verify.js";
import { listen, type RunningServer } from "../src/listen.js";
import { type SigningKey, signingKey, startIssuer, type TestIssuer } from "./support/oidc.js";
import { call } from "./support/service.js";

/**
 * Token confusion: an ID token or a logout token the provider signed for a client whose ID is
 * also this service's audience verifies like an access token (same issuer, same keys, same
 * `aud`). Only the header's `typ` tells them apart: `tokenType` requires one, and a `typ` that
 * says "never an access token" is refused even without it.
 */
const ISSUER = "https://id.example.com/";
const AUDIENCE = "https://tessera.example.com/";

let key: SigningKey;
let jwksFile: string;

function identity(over: Partial<JwtIdentityInput> = {}): JwtIdentityInput {
  return {
    issuer: ISSUER,
    audience: AUDIENCE,
    jwksFile,
    algorithms: ["ES256"],
    claims: { namespaceId: { value: "team" }, authority: { value: "host" } },
    ...over,
  };
}

/** A token signed by the provider's own key for this audience: only its `typ` varies. */
function signed(typ: string | undefined, signer: SigningKey = key): Promise<string> {
  return new SignJWT({ sub: "agent-7" })
    .setProtectedHeader({ alg: "ES256", kid: signer.kid, ...(typ === undefined ? {} : { typ }) })
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .setExpirationTime("5m")
    .sign(signer.privateKey);
}

beforeAll(async () => {
  key = await signingKey("typ-1");
  jwksFile = join(mkdtempSync(join(tmpdir(), "identity-typ-")), "keys.json");
  writeFileSync(jwksFile, JSON.stringify({ keys: [key.publicJwk] }));
});

describe("tokenType in the identity config", () => {
  it("takes a media type, with or without application/", () => {
    for (const tokenType of ["at+jwt", "application/at+jwt", "JWT"]) {
      expect(parseJwtIdentity(identity({ tokenType })).tokenType).toBe(tokenType);
    }
    expect(parseJwtIdentity(identity()).tokenType).toBeUndefined();
  });

  it("refuses what is no media type, and a type that is never an access token's", () => {
    for (const tokenType of ["", 'at+jwt"', "at jwt", "a/b/c", "at+jwt\\"]) {
      expect(() => parseJwtIdentity(identity({ tokenType })), tokenType).toThrow(
        /tokenType: a media type/,
      );
    }
    for (const tokenType of ["logout+jwt", "Application/SecEvent+JWT"]) {
      expect(() => parseJwtIdentity(identity({ tokenType })), tokenType).toThrow(
        /tokenType: names a token never an access token/,
      );
    }
  });
});

describe("the header typ, with tokenType at+jwt", () => {
  const verifier = () => new JwtVerifier(parseJwtIdentity(identity({ tokenType: "at+jwt" })));

  it("accepts at+jwt however RFC 7515 lets it be written", async () => {
    const v = verifier();
    for (const typ of ["at+jwt", "AT+JWT", "application/at+jwt", "Application/At+Jwt"]) {
      expect(await v.verify(await signed(typ)), typ).toMatchObject({
        ok: true,
        identity: { namespaceId: "team", actor: "agent-7", authority: "host" },
      });
    }
  });

  it("refuses typ JWT (an ID token's) and no typ: 401 wrong_type, naming the type expected", async () => {
    const v = verifier();
    for (const typ of ["JWT", undefined, "application/jwt", "at+jwt+x", "logout+jwt"]) {
      const token = await signed(typ);
      const verdict = await v.verify(token);
      expect(verdict, String(typ)).toEqual({
        ok: false,
        status: 401,
        reason: "wrong_type",
        detail: "the token's type (typ) is not at+jwt",
      });
    }
  });

  it("a forged token learns nothing of the type: its signature is judged first", async () => {
    const stranger = await signingKey("typ-1");
    const verdict = await verifier().verify(await signed("JWT", stranger));
    expect(verdict).toMatchObject({ ok: false, reason: "bad_signature" });
  });

  it("a reload that sets tokenType refuses a token cached before it", async () => {
    const v = new JwtVerifier(parseJwtIdentity(identity()));
    const idToken = await signed("JWT");
    expect(await v.verify(idToken)).toMatchObject({ ok: true });
    expect(v.verifyCached(idToken)).toMatchObject({ ok: true });
    v.reconfigure(parseJwtIdentity(identity({ tokenType: "at+jwt" })));
    expect(v.verifyCached(idToken)).toBeUndefined();
    expect(await v.verify(idToken)).toMatchObject({ ok: false, reason: "wrong_type" });
  });
});

describe("the header typ, without tokenType (the default)", () => {
  it("accepts JWT, no typ and at+jwt, as before: providers label access tokens all three ways", async () => {
    const v = new JwtVerifier(parseJwtIdentity(identity()));
    for (const typ of ["JWT", undefined, "at+jwt", "application/jwt"]) {
      expect(await v.verify(await signed(typ)), String(typ)).toMatchObject({ ok: true });
    }
  });

  it("refuses a typ that registered specifications give only to other tokens", async () => {
    const v = new JwtVerifier(parseJwtIdentity(identity()));
    const cases = [
      ["logout+jwt", "logout+jwt"],
      ["Logout+JWT", "logout+jwt"],
      ["application/secevent+jwt", "secevent+jwt"],
      ["token-introspection+jwt", "token-introspection+jwt"],
      ["dpop+jwt", "dpop+jwt"],
      ["oauth-authz-req+jwt", "oauth-authz-req+jwt"],
    ] as const;
    for (const [typ, named] of cases) {
      expect(await v.verify(await signed(typ)), typ).toEqual({
        ok: false,
        status: 401,
        reason: "wrong_type",
        detail: `the token's type (typ) is ${named}, never an access token`,
      });
    }
  });
});

describe("over HTTP", () => {
  let stores: StoreBundle;
  let server: RunningServer;
  const lines: Record<string, unknown>[] = [];

  beforeAll(async () => {
    stores = await openStores(`sqlite:${join(mkdtempSync(join(tmpdir(), "typ-")), "t.db")}`);
    server = await listen({
      stores,
      principals: [],
      identity: identity({ tokenType: "at+jwt" }),
      port: 0,
      log: { level: "info", stream: { write: (line) => lines.push(JSON.parse(line)) } },
    });
  });

  afterAll(async () => {
    await server?.close();
    await stores?.close();
  });

  it("an at+jwt token is served; an ID-token-typed one is 401 invalid_token, logged wrong_type", async () => {
    const access = await call(server.url, "GET", "/v1/tools", { token: await signed("at+jwt") });
    expect(access.status).toBe(200);
    const idToken = await signed("JWT");
    const answer = await call(server.url, "GET", "/v1/tools", { token: idToken });
    expect(answer.status).toBe(401);
    expect(answer.body.error.code).toBe("unauthenticated");
    expect(answer.headers.get("www-authenticate")).toBe(
      `Bearer realm="tessera", error="invalid_token", error_description="the token's type (typ) is not at+jwt"`,
    );
    const logged = lines.findLast((l) => String(l.msg).includes("refused"));
    expect(logged?.identity).toMatchObject({ reason: "wrong_type" });
    expect(JSON.stringify(lines)).not.toContain(idToken.split(".")[2]);
  });
});

describe("against a real OpenID provider (oidc-provider)", () => {
  let issuer: TestIssuer;
  afterAll(async () => {
    await issuer?.close();
  });

  it("its JWT access token (at+jwt) is accepted, a JWT-typed token of its key is not", async () => {
    const k1 = await signingKey("op-1");
    issuer = await startIssuer(
      [{ id: "billing-agent", secret: "client-secret-".padEnd(48, "t"), claims: {} }],
      [k1],
    );
    const config = parseJwtIdentity({
      ...identity({ tokenType: "at+jwt" }),
      jwksFile: undefined,
      issuer: issuer.issuer,
      jwksUri: issuer.jwksUri,
    });
    const verifier = new JwtVerifier(config);
    const access = await issuer.token("billing-agent", AUDIENCE);
    expect(decodeProtectedHeader(access).typ).toBe("at+jwt");
    expect(await verifier.verify(access)).toMatchObject({
      ok: true,
      identity: { actor: "billing-agent" },
    });
    // The test provider issues no ID tokens (client credentials only): one is made as the
    // provider makes them, typ JWT, signed with its key, `aud` the client ID that is also
    // this audience.
    const { exp, iat } = decodeJwt(access);
    const idToken = await new SignJWT({ sub: "billing-agent", iat, exp })
      .setProtectedHeader({ alg: "ES256", typ: "JWT", kid: k1.kid })
      .setIssuer(issuer.issuer)
      .setAudience(AUDIENCE)
      .sign(k1.privateKey);
    expect(await verifier.verify(idToken)).toMatchObject({ ok: false, reason: "wrong_type" });
    const { tokenType: _, ...untyped } = config;
    const unchecked = new JwtVerifier(untyped);
    expect(await unchecked.verify(idToken)).toMatchObject({ ok: true });
  });
});
