import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
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

  it("plain HTTP only to a loopback IP literal or localhost, never a name that looks like one", () => {
    for (const host of [
      "127.0.0.1.attacker.example",
      "127.evil",
      "127.0.0.1.nip.io",
      "localhost.attacker.example",
      "10.0.0.5",
      "[::2]",
      "[::ffff:10.0.0.5]",
    ]) {
      expect(() => parseJwtIdentity({ ...base, jwksUri: `http://${host}/jwks` }), host).toThrow(
        /jwksUri: must be https/,
      );
    }
    for (const host of ["127.0.0.1:8080", "127.8.9.10", "localhost:9", "[::1]:9"]) {
      const jwksUri = `http://${host}/jwks`;
      expect(parseJwtIdentity({ ...base, jwksUri }).jwksUri, host).toBe(jwksUri);
    }
    // Any name over HTTPS: the certificate vouches for it.
    expect(
      parseJwtIdentity({ ...base, jwksUri: "https://127.0.0.1.attacker.example/jwks" }).jwksUri,
    ).toBe("https://127.0.0.1.attacker.example/jwks");
  });

  it("a fixed role must be agent or issuer: any other value would refuse every token", () => {
    const claims = (role: unknown) => ({ ...base, claims: { ...base.claims, role } });
    for (const value of ["admin", "Agent", "root"]) {
      expect(() => parseJwtIdentity(claims({ value }))).toThrow(
        /claims\.role: a fixed role must be agent or issuer/,
      );
    }
    expect(parseJwtIdentity(claims({ value: "issuer" })).claims.role).toEqual({ value: "issuer" });
    expect(parseJwtIdentity(claims({ value: "agent" })).claims.role).toEqual({ value: "agent" });
    // From a claim, the value is judged per token (403 unmapped_claims when neither).
    expect(parseJwtIdentity(claims({ claim: "role" })).claims.role).toEqual({ claim: "role" });
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

    // Refused when the identity is put in force, not at the first token (every one a 401).
    writeFileSync(join(dir, "keys.json"), JSON.stringify({ keys: [key.privateJwk] }));
    expect(() => new JwtVerifier(loadJwtIdentity(join(dir, "identity.json")))).toThrow(
      /jwksFile: the JWKS file at .*keys\.json: the JWKS holds a private or symmetric key/,
    );
  });

  it("a bad jwksFile is invalid_config at start, and a reload to it keeps the identity in force", async () => {
    const dir = mkdtempSync(join(tmpdir(), "identity-jwksfile-"));
    const key = await signingKey("file-2");
    const keysPath = join(dir, "keys.json");
    writeFileSync(keysPath, JSON.stringify({ keys: [key.publicJwk] }));
    const { jwksUri: _, ...rest } = base;
    const config = parseJwtIdentity({ ...rest, jwksFile: keysPath });
    const startWith = (text: string | undefined) => {
      if (text === undefined) rmSync(keysPath, { force: true });
      else writeFileSync(keysPath, text);
      return () => new JwtVerifier(config);
    };
    const invalid = (pattern: RegExp) =>
      expect.objectContaining({ code: "invalid_config", message: expect.stringMatching(pattern) });
    expect(startWith(undefined)).toThrow(invalid(/jwksFile: no JWKS file at .*keys\.json/));
    expect(startWith(JSON.stringify({ keys: [key.privateJwk] }))).toThrow(
      invalid(/private or symmetric key/),
    );
    expect(startWith("{")).toThrow(invalid(/jwksFile: the JWKS file at .*keys\.json/));
    expect(startWith(JSON.stringify({ nokeys: [] }))).toThrow(invalid(/no keys array/));

    writeFileSync(keysPath, JSON.stringify({ keys: [key.publicJwk] }));
    const verifier = new JwtVerifier(config);
    const token = await new SignJWT({ sub: "agent-7" })
      .setProtectedHeader({ alg: "ES256", kid: "file-2" })
      .setIssuer(base.issuer)
      .setAudience(base.audience)
      .setExpirationTime("1m")
      .sign(key.privateKey);
    // What SIGHUP does (listen's reloadIdentity): the reload throws, the identity in force stays.
    rmSync(keysPath);
    const other = { ...config, issuer: "https://other.example.com/" };
    expect(() => verifier.reconfigure(other)).toThrow(invalid(/no JWKS file/));
    expect(verifier.config).toBe(config);
    expect(await verifier.verify(token)).toMatchObject({ ok: true });
  });

  it("refuses an identity file or jwksFile that group or others may write", async () => {
    const dir = mkdtempSync(join(tmpdir(), "identity-modes-"));
    const key = await signingKey("file-3");
    const keysPath = join(dir, "keys.json");
    const identityPath = join(dir, "identity.json");
    writeFileSync(keysPath, JSON.stringify({ keys: [key.publicJwk] }));
    const { jwksUri: _, ...rest } = base;
    writeFileSync(identityPath, JSON.stringify({ ...rest, jwksFile: "keys.json" }));
    chmodSync(keysPath, 0o644);
    chmodSync(identityPath, 0o644);
    // Readable by all is fine: neither holds a secret.
    expect(new JwtVerifier(loadJwtIdentity(identityPath)).config.jwksFile).toBe(keysPath);

    for (const mode of [0o664, 0o646, 0o666]) {
      chmodSync(identityPath, mode);
      const octal = mode.toString(8).padStart(4, "0");
      expect(() => loadJwtIdentity(identityPath)).toThrow(
        expect.objectContaining({
          code: "invalid_config",
          message: `the identity file at ${identityPath} is mode ${octal}: others may change which tokens are accepted; chmod 644 ${identityPath}`,
        }),
      );
    }
    chmodSync(identityPath, 0o600);
    const config = loadJwtIdentity(identityPath);
    chmodSync(keysPath, 0o666);
    expect(() => new JwtVerifier(config)).toThrow(
      expect.objectContaining({
        code: "invalid_config",
        message: expect.stringMatching(
          `the JWKS file at ${keysPath} is mode 0666: .*chmod 644 ${keysPath}`,
        ),
      }),
    );

    // Made writable after start: the re-read for an unknown kid refuses it (the keys held stay).
    chmodSync(keysPath, 0o644);
    const loadErrors: unknown[] = [];
    let at = Date.now();
    const verifier = new JwtVerifier(
      { ...config, jwksRefetchSeconds: 1 },
      { onKeyLoadError: (error) => loadErrors.push(error), now: () => at },
    );
    chmodSync(keysPath, 0o620);
    at += 2000;
    const unknown = await signingKey("file-4");
    const token = await new SignJWT({ sub: "agent-7" })
      .setProtectedHeader({ alg: "ES256", kid: unknown.kid })
      .setIssuer(base.issuer)
      .setAudience(base.audience)
      .setExpirationTime("1m")
      .sign(unknown.privateKey);
    expect(await verifier.verify(token)).toMatchObject({ ok: false, reason: "unknown_key" });
    expect(String(loadErrors[0])).toMatch(/is mode 0620: chmod 644/);
  });

  it("a missing identity file is file_not_found", () => {
    expect(() => loadJwtIdentity("/nonexistent/identity.json")).toThrow(/no identity file/);
  });
});
