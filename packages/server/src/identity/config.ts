import { isIP } from "node:net";
import { dirname, resolve } from "node:path";
import { TesseraError } from "@tessera/core";
import { octalMode, readGuardedFile, WRITABLE_BY_OTHERS } from "@tessera/core/store-kit";
import { z } from "zod";

/**
 * How the service (and the MCP gateway) accepts JWT access tokens from the host's identity
 * provider: whose tokens (issuer), minted for whom (audience: this service's own resource URL,
 * RFC 8707), signed how (asymmetric algorithms only), with which keys (the issuer's JWKS, or a
 * file), and which claims say who the caller is. Checked once at start; every problem names
 * its field.
 */

/**
 * Asymmetric JWS algorithms only. `none` and the HMAC family are not expressible: a key set of
 * public keys must never verify a token keyed by one of those public keys read as a secret.
 */
export const ASYMMETRIC_ALGORITHMS = [
  "RS256",
  "RS384",
  "RS512",
  "PS256",
  "PS384",
  "PS512",
  "ES256",
  "ES384",
  "ES512",
  "EdDSA",
  "Ed25519",
] as const;
export type AsymmetricAlgorithm = (typeof ASYMMETRIC_ALGORITHMS)[number];

const id = z.string().min(1).max(512);
/** A claim name (`sub`, `client_id`) or a dotted path into nested claims (`ext.tenant`). */
const claimName = z.string().regex(/^[A-Za-z0-9_:$-]+(\.[A-Za-z0-9_:$-]+)*$/, "a claim name");
const ROLES: readonly string[] = ["agent", "issuer"];
/** Where one part of the principal comes from: a claim of the token, or a fixed value. */
const Source = z.union([z.strictObject({ claim: claimName }), z.strictObject({ value: id })]);
export type ClaimSource = z.infer<typeof Source>;

const ClaimMapSchema = z
  .strictObject({
    namespaceId: Source,
    actor: Source.default({ claim: "sub" }),
    /** The grant issuer this principal decides under (`AccessContext.authority`). */
    authority: Source,
    owner: Source.optional(),
    purpose: Source.optional(),
    /** Must read `agent` or `issuer`; any other value is refused, never defaulted. */
    role: Source.default({ value: "agent" }),
    /** The A2UI gate's trusted host session; derived from the identity when absent. */
    session: Source.optional(),
  })
  // A fixed role is read by every token: any other value would refuse every caller at run time.
  .refine((map) => !("value" in map.role) || ROLES.includes(map.role.value), {
    message: "a fixed role must be agent or issuer",
    path: ["role"],
  });
export type ClaimMap = z.infer<typeof ClaimMapSchema>;

/**
 * A media type's name (RFC 6838 restricted names), with or without its `application/`. Quotes
 * and backslashes cannot pass: the type is named in a `WWW-Authenticate` quoted string.
 */
const MEDIA_TYPE =
  /^([A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}\/)?[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}$/;

/**
 * `typ` values that registered specifications give to JWTs that are never access tokens, yet
 * may be signed by the same provider for the same audience: refused even without `tokenType`,
 * since a provider following those specifications never labels an access token so (RFC 8725,
 * 3.11: explicit typing is there to keep one kind of token from being taken for another).
 */
export const NOT_ACCESS_TOKEN_TYPES = [
  "logout+jwt", // OpenID Connect Back-Channel Logout 1.0, 2.4
  "secevent+jwt", // RFC 8417, Security Event Tokens
  "token-introspection+jwt", // RFC 9701, signed introspection answers
  "dpop+jwt", // RFC 9449, DPoP proofs
  "oauth-authz-req+jwt", // RFC 9101, request objects
] as const;

/**
 * A `typ` as RFC 7515 (4.1.9) compares it: case-insensitive, `application/` implied when no
 * `/` is written. The same rule as jose's own `typ` check.
 */
function normalizeTokenType(typ: string): string {
  const lower = typ.toLowerCase();
  return lower.includes("/") ? lower : `application/${lower}`;
}

const NOT_ACCESS = new Map(NOT_ACCESS_TOKEN_TYPES.map((t) => [normalizeTokenType(t), t]));

/** The listed never-an-access-token type this `typ` is, or undefined. */
export function notAccessTokenType(typ: string): string | undefined {
  return NOT_ACCESS.get(normalizeTokenType(typ));
}

export const JwtIdentitySchema = z
  .strictObject({
    /** The `iss` every token must carry, exactly. */
    issuer: z.string().min(1),
    /** This service's resource URL: a token whose `aud` does not name it is refused. */
    audience: z.url({ protocol: /^https?$/ }),
    /** The issuer's JWKS (`jwks_uri` of its discovery document); HTTPS, or HTTP on loopback. */
    jwksUri: z.url({ protocol: /^https?$/ }).optional(),
    /** A JWKS file (public keys), read at start and again when a token names an unknown key. */
    jwksFile: z.string().min(1).optional(),
    algorithms: z.array(z.enum(ASYMMETRIC_ALGORITHMS)).min(1).default(["RS256", "PS256", "ES256"]),
    /** Tolerance for `exp` and `nbf` against this machine's clock. */
    clockSkewSeconds: z.int().min(0).max(300).default(30),
    /** At most one JWKS fetch this often when tokens name keys it does not hold. */
    jwksRefetchSeconds: z.int().min(1).max(3600).default(30),
    /** Keys older than this are refreshed in the background; a failed refresh keeps them. */
    jwksMaxAgeSeconds: z.int().min(1).max(86_400).default(600),
    jwksTimeoutMs: z.int().positive().max(60_000).default(5000),
    /** A scope the token's `scope` or `scp` must list, else 403 `insufficient_scope`. */
    requiredScope: z
      .string()
      .regex(/^[\x21\x23-\x5B\x5D-\x7E]+$/, "one scope token")
      .optional(),
    /**
     * The header `typ` every token must carry (`at+jwt`, RFC 9068), compared as RFC 7515 says:
     * case-insensitively, with `application/` implied. Unset: any `typ` but a never-an-access-
     * token one (`NOT_ACCESS_TOKEN_TYPES`).
     */
    tokenType: z
      .string()
      .regex(MEDIA_TYPE, "a media type such as at+jwt")
      .refine((t) => notAccessTokenType(t) === undefined, "names a token never an access token")
      .optional(),
    claims: ClaimMapSchema,
  })
  .refine((c) => (c.jwksUri === undefined) !== (c.jwksFile === undefined), {
    message: "name exactly one of jwksUri and jwksFile",
    path: ["jwksUri"],
  })
  .refine((c) => c.jwksUri === undefined || httpsOrLoopback(new URL(c.jwksUri)), {
    message: "must be https: (http: only on a loopback address, for tests)",
    path: ["jwksUri"],
  });

export type JwtIdentityConfig = z.infer<typeof JwtIdentitySchema>;
export type JwtIdentityInput = z.input<typeof JwtIdentitySchema>;

/** Checks an identity config given as data; `invalid_config` names every field that is wrong. */
export function parseJwtIdentity(value: unknown): JwtIdentityConfig {
  const parsed = JwtIdentitySchema.safeParse(value);
  if (!parsed.success) {
    const where = parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ");
    throw new TesseraError("invalid_config", `the identity config does not match: ${where}`);
  }
  return parsed.data;
}

/**
 * Reads and checks an identity file (`tessera serve --identity`, `identity` in tessera.json):
 * the config above as JSON. A relative `jwksFile` is the identity file's folder's.
 */
export function loadJwtIdentity(path: string): JwtIdentityConfig {
  let raw: unknown;
  try {
    raw = JSON.parse(readUnwritableByOthers(path, "the identity file"));
  } catch (error) {
    if (error instanceof TesseraError) throw error;
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") {
      throw new TesseraError("file_not_found", `no identity file at ${path}`, { cause: error });
    }
    throw new TesseraError(
      "invalid_config",
      `the identity file at ${path} cannot be read (${code ?? "not JSON"})`,
      { cause: error },
    );
  }
  const config = parseJwtIdentity(raw);
  return config.jwksFile === undefined
    ? config
    : { ...config, jwksFile: resolve(dirname(path), config.jwksFile) };
}

/**
 * A file's text, read through one descriptor with its mode: a file that group or others may
 * write is refused (`invalid_config`), since whoever can write it chooses which tokens are
 * good (the issuer, the keys, the claims). Readable by others stays allowed: the identity file
 * and a JWKS hold no secret. Shared by the identity file and `jwksFile` (keys.ts).
 */
export function readUnwritableByOthers(path: string, what: string): string {
  const read = readGuardedFile(path, WRITABLE_BY_OTHERS);
  if (read.status === "read") return read.text;
  if (read.status === "open_to_others") {
    throw new TesseraError(
      "invalid_config",
      `${what} at ${path} is mode ${octalMode(read.mode)}: others may change which tokens are accepted; chmod 644 ${path}`,
    );
  }
  // The system's error, which the caller names (missing, unreadable).
  throw read.cause;
}

/**
 * Keys fetched in clear text could be swapped on the way: only this machine is trusted so. The
 * host must be a loopback IP literal or exactly `localhost`, never a name that merely begins
 * like one (`127.0.0.1.attacker.example` resolves wherever its owner says).
 */
export function httpsOrLoopback(url: URL): boolean {
  if (url.protocol === "https:") return true;
  if (url.protocol !== "http:") return false;
  const host = url.hostname.replace(/^\[|\]$/g, "");
  if (host === "localhost") return true;
  switch (isIP(host)) {
    case 4:
      return host.startsWith("127.");
    case 6:
      // The URL parser writes IPv6 compressed and lower-case, so ::1 has this one spelling.
      return host === "::1";
    default:
      return false;
  }
}
