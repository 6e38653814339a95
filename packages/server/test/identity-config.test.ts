import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SignJWT } from "jose";
import { describe, expect, it } from "vitest";
import { loadJwtIdentity, parseJwtIdentity } from "../src/identity/config.js";
import { JwtVerifier } from "../src/identity/verify.js";
import { signingKey } from "./support/oidc.js";

/** The identity config: what it refuses at start, and keys read from a file. */
const base = {
  issuer: "https://id.example.com/",
  audience: "https://tessera.example.com/",
  jwksUri: "https://id.example.com/jwks",
  claims: { namespaceId: { value: "team" }, authority: { value: "host" } },
};

describe("identity config", () => {
  it("refuses none and HMAC algorithms: only asymmetric ones are expressible", () => {
    for (const alg of ["none", "HS256", "HS512"]) {
      expect(() => parseJwtIdentity({ ...base, algorithms: [alg] })).toThrow(/algorithms\.0/);
    }
    expect(parseJwtIdentity({ ...base, algorithms: ["RS256", "ES256"] }).algorithms).toEqual([
      "RS256",
      "ES256",
    ]);
  });

  it("takes keys over HTTPS, or HTTP on loopback only", () => {
    expect(() => parseJwtIdentity({ ...base, jwksUri: "http://id.example.com/jwks" })).toThrow(
      /jwksUri: must be https/,
    );
    expect(parseJwtIdentity({ ...base, jwksUri: "http://127.0.0.1:9/jwks" }).jwksUri).toBe(
      "http://127.0.0.1:9/jwks",
    );
  });

  it("needs exactly one key source", () => {
    const { jwksUri: _, ...none } = base;
    expect(() => parseJwtIdentity(none)).toThrow(/exactly one of jwksUri and jwksFile/);
    expect(() => parseJwtIdentity({ ...base, jwksFile: "keys.json" })).toThrow(/exactly one/);
  });

  it("reads keys from a file beside the identity file, and refuses a private key in it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "identity-file-"));
    const key = await signingKey("file-1");
    writeFileSync(join(dir, "keys.json"), JSON.stringify({ keys: [key.publicJwk] }));
    const { jwksUri: _, ...rest } = base;
    writeFileSync(join(dir, "identity.json"), JSON.stringify({ ...rest, jwksFile: "keys.json" }));
    const verifier = new JwtVerifier(loadJwtIdentity(join(dir, "identity.json")));
    const token = await new SignJWT({ sub: "agent-7" })
      .setProtectedHeader({ alg: "ES256", kid: "file-1" })
      .setIssuer(base.issuer)
      .setAudience(base.audience)
      .setExpirationTime("1m")
      .sign(key.privateKey);
    expect(await verifier.verify(token)).toMatchObject({
      ok: true,
      identity: { namespaceId: "team", actor: "agent-7", authority: "host", role: "agent" },
    });

    writeFileSync(join(dir, "keys.json"), JSON.stringify({ keys: [key.privateJwk] }));
    const loadErrors: unknown[] = [];
    const strict = new JwtVerifier(loadJwtIdentity(join(dir, "identity.json")), {
      onKeyLoadError: (error) => loadErrors.push(error),
    });
    expect(await strict.verify(token)).toMatchObject({ ok: false, reason: "keys_unavailable" });
    expect(String(loadErrors[0])).toMatch(/private or symmetric key/);
  });

  it("a missing identity file is file_not_found", () => {
    expect(() => loadJwtIdentity("/nonexistent/identity.json")).toThrow(/no identity file/);
  });
});
