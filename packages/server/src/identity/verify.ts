import { MAX_BEARER_CHARS } from "@tessera/core/http";
import {
  type JWTPayload,
  type JWTVerifyGetKey,
  type JWTVerifyOptions,
  type JWTVerifyResult,
  errors as joseErrors,
  jwtVerify,
} from "jose";
import {
  type ClaimMap,
  type ClaimSource,
  type JwtIdentityConfig,
  notAccessTokenType,
} from "./config.js";
import {
  CachedKeySet,
  jwksFromFile,
  jwksFromUrl,
  KeysUnavailable,
  readJwksFileNow,
  UnknownKey,
} from "./keys.js";
import { DEFAULT_CACHE_ENTRIES, VerifiedTokenCache } from "./token-cache.js";

/** Who a verified token says the caller is, mapped by the configured claims. */
export interface TokenIdentity {
  readonly namespaceId: string;
  readonly actor: string;
  readonly authority: string;
  readonly owner?: string;
  readonly purpose?: string;
  readonly role: "agent" | "issuer";
  readonly session?: string;
  /** The token's `scope` (space-separated) or `scp` (space-separated or array), as a list. */
  readonly scopes: readonly string[];
}

/**
 * What failed, named for logs and for the caller's `error_description`; never the token or a
 * claim's value. 401 for the token itself, 403 for a good token that does not map to a
 * principal or lacks the required scope.
 */
export type TokenRefusal =
  | "malformed"
  | "algorithm_not_allowed"
  | "unknown_key"
  | "keys_unavailable"
  | "bad_signature"
  | "expired"
  | "not_yet_valid"
  | "wrong_issuer"
  | "wrong_audience"
  | "wrong_type"
  | "invalid_claims"
  | "unmapped_claims"
  | "insufficient_scope";

export type TokenVerdict =
  | { readonly ok: true; readonly identity: TokenIdentity }
  | {
      readonly ok: false;
      readonly status: 401 | 403;
      readonly reason: TokenRefusal;
      /** One sentence naming the failure (a claim's name at most). */
      readonly detail: string;
    };

const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*$/;

/**
 * A compact JWS's shape: three base64url parts. Anything else is not for this verifier, nor is
 * anything longer than a bearer header may carry (`MAX_BEARER_CHARS`), which is refused unread.
 */
export function looksLikeJwt(token: string): boolean {
  return token.length <= MAX_BEARER_CHARS && JWT_SHAPE.test(token);
}

export interface JwtVerifierOptions {
  /** Told about every failed key-set load (the JWKS endpoint down, a bad file). */
  readonly onKeyLoadError?: (error: unknown) => void;
  /** The clock, in ms since the epoch: expiry (cached or not) and key ages are read from it. */
  readonly now?: () => number;
  /** How many verified tokens are kept (default 1,024); 0 verifies every request. */
  readonly cacheEntries?: number;
}

/**
 * Verifies access tokens from one issuer for one audience and maps their claims to a
 * principal. Keys and verified tokens are cached for the verifier's lifetime: build one per
 * service, not per request. The one place both the service and the MCP gateway validate tokens.
 */
export class JwtVerifier {
  #config: JwtIdentityConfig;
  #keys: CachedKeySet;
  readonly #options: JwtVerifierOptions;
  readonly #now: () => number;
  readonly #cache: VerifiedTokenCache<TokenIdentity> | undefined;
  #verifications = 0;

  constructor(config: JwtIdentityConfig, options: JwtVerifierOptions = {}) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
    const entries = options.cacheEntries ?? DEFAULT_CACHE_ENTRIES;
    this.#cache = entries > 0 ? new VerifiedTokenCache(entries) : undefined;
    this.#config = config;
    this.#keys = this.#keySet(config);
  }

  get config(): JwtIdentityConfig {
    return this.#config;
  }

  /**
   * Puts a new configuration in force (`tessera serve` on SIGHUP): its issuer, audience, token
   * type, keys and claim mapping judge the next token; every verified token is forgotten,
   * since what made it good may have changed. `config` must already be checked (`parseJwtIdentity`). A
   * `jwksFile` is read now: when it is missing or bad this throws `invalid_config` and the
   * configuration in force stays.
   */
  reconfigure(config: JwtIdentityConfig): void {
    const keys = this.#keySet(config);
    this.#config = config;
    this.#keys = keys;
    this.#cache?.clear();
  }

  /**
   * `verified`: tokens checked by signature (refused ones too); `cacheHits`: uses answered
   * from the cache; `cached`: verified tokens held now.
   */
  get stats(): { readonly verified: number; readonly cacheHits: number; readonly cached: number } {
    return {
      verified: this.#verifications,
      cacheHits: this.#cache?.hits ?? 0,
      cached: this.#cache?.size ?? 0,
    };
  }

  /**
   * The verdict the cache holds for this token, synchronously: its identity, or its refusal
   * when its time ran out; undefined when it must be verified (`verify`). The service's
   * request hook answers a cached token within the request's own callback.
   */
  verifyCached(token: string): TokenVerdict | undefined {
    if (this.#cache === undefined) return undefined;
    return this.#fromCache(VerifiedTokenCache.digest(token));
  }

  async verify(token: string): Promise<TokenVerdict> {
    if (!looksLikeJwt(token)) return refused(401, "malformed", "the token is not a compact JWT");
    const config = this.#config;
    const keys = this.#keys;
    const digest = this.#cache === undefined ? "" : VerifiedTokenCache.digest(token);
    const cached = this.#cache === undefined ? undefined : this.#fromCache(digest);
    if (cached !== undefined) return cached;
    this.#verifications++;
    let payload: JWTPayload;
    let kid: string | undefined;
    let typ: unknown;
    try {
      let protectedHeader: { kid?: string; typ?: unknown };
      ({ payload, protectedHeader } = await verifyAgainstSet(token, keys.key, {
        issuer: config.issuer,
        audience: config.audience,
        algorithms: [...config.algorithms],
        clockTolerance: config.clockSkewSeconds,
        requiredClaims: ["exp"],
        // jose compares as RFC 7515 says (case, `application/`), after the signature verifies.
        ...(config.tokenType === undefined ? {} : { typ: config.tokenType }),
        ...(this.#options.now === undefined ? {} : { currentDate: new Date(this.#now()) }),
      }));
      ({ kid, typ } = protectedHeader);
    } catch (error) {
      return verificationFailure(error, config);
    }
    // Checked with or without `tokenType`: a token that says it is another kind is never one.
    const other = typeof typ === "string" ? notAccessTokenType(typ) : undefined;
    if (other !== undefined) {
      return refused(
        401,
        "wrong_type",
        `the token's type (typ) is ${other}, never an access token`,
      );
    }
    const mapped = mapClaims(payload, config.claims);
    if (typeof mapped === "string") return refused(403, "unmapped_claims", mapped);
    const required = config.requiredScope;
    if (required !== undefined && !mapped.scopes.includes(required)) {
      return refused(403, "insufficient_scope", `the token's scope lacks ${required}`);
    }
    // Kept only if the configuration it was judged by is still the one in force.
    if (this.#cache !== undefined && config === this.#config && keys === this.#keys) {
      this.#cache.set(
        digest,
        {
          value: mapped,
          exp: payload.exp as number,
          ...(payload.nbf === undefined ? {} : { nbf: payload.nbf }),
          ...(kid === undefined ? {} : { kid }),
          generation: keys.generation,
        },
        keys,
      );
    }
    return { ok: true, identity: mapped };
  }

  #fromCache(digest: string): TokenVerdict | undefined {
    const keys = this.#keys;
    const cached = (this.#cache as VerifiedTokenCache<TokenIdentity>).get(
      digest,
      Math.floor(this.#now() / 1000),
      this.#config.clockSkewSeconds,
      keys,
    );
    if (cached.found) {
      keys.freshen();
      return { ok: true, identity: cached.value };
    }
    if (cached.expired === "expired") return refused(401, "expired", "the token is expired");
    if (cached.expired === "not_yet_valid") {
      return refused(401, "not_yet_valid", "the token is not valid yet");
    }
    return undefined;
  }

  #keySet(config: JwtIdentityConfig): CachedKeySet {
    const { onKeyLoadError } = this.#options;
    const keys: CachedKeySet = new CachedKeySet({
      load:
        config.jwksUri !== undefined
          ? jwksFromUrl(config.jwksUri, config.jwksTimeoutMs)
          : jwksFromFile(config.jwksFile as string),
      // A file is read and checked now, so a bad one stops the start (or the reload).
      ...(config.jwksFile === undefined ? {} : { initial: readJwksFileNow(config.jwksFile) }),
      refetchMs: config.jwksRefetchSeconds * 1000,
      maxAgeMs: config.jwksMaxAgeSeconds * 1000,
      now: this.#now,
      ...(onKeyLoadError === undefined ? {} : { onLoadError: onKeyLoadError }),
      // A reload that removed a key drops the tokens it signed from the cache at once.
      onReplaced: () => {
        if (keys === this.#keys) this.#cache?.prune(keys);
      },
    });
    return keys;
  }
}

/**
 * How many of the issuer's keys a token without a `kid` is tried against when more than one
 * fits its algorithm. Two or three during a rotation's overlap; the bound keeps a set of many
 * same-type keys from costing many signature checks per forged token.
 */
const MAX_CANDIDATE_KEYS = 4;

/**
 * `jwtVerify` against the key set. A token without a `kid` while the issuer publishes several
 * keys of its type (a rotation's overlap) matches more than one: jose then hands over the
 * candidates (`JWKSMultipleMatchingKeys` is iterable over them), and the first that verifies
 * the signature wins. Any other failure with a candidate (an expired token) is the verdict.
 */
async function verifyAgainstSet(
  token: string,
  key: JWTVerifyGetKey,
  options: JWTVerifyOptions,
): Promise<JWTVerifyResult> {
  try {
    return await jwtVerify(token, key, options);
  } catch (error) {
    if (!(error instanceof joseErrors.JWKSMultipleMatchingKeys)) throw error;
    let tried = 0;
    for await (const candidate of error) {
      if (tried++ === MAX_CANDIDATE_KEYS) break;
      try {
        return await jwtVerify(token, candidate, options);
      } catch (failure) {
        if (!(failure instanceof joseErrors.JWSSignatureVerificationFailed)) throw failure;
      }
    }
    throw new joseErrors.JWSSignatureVerificationFailed();
  }
}

function refused(status: 401 | 403, reason: TokenRefusal, detail: string): TokenVerdict {
  return { ok: false, status, reason, detail };
}

function verificationFailure(error: unknown, config: JwtIdentityConfig): TokenVerdict {
  if (error instanceof joseErrors.JWTExpired) {
    return refused(401, "expired", "the token is expired");
  }
  if (error instanceof joseErrors.JWTClaimValidationFailed) {
    switch (error.claim) {
      case "iss":
        return refused(401, "wrong_issuer", "the token is from another issuer");
      case "aud":
        return refused(401, "wrong_audience", "the token is for another audience");
      case "nbf":
        return refused(401, "not_yet_valid", "the token is not valid yet");
      case "typ":
        return refused(401, "wrong_type", `the token's type (typ) is not ${config.tokenType}`);
      default:
        return refused(401, "invalid_claims", `the token's ${error.claim} claim is invalid`);
    }
  }
  if (error instanceof joseErrors.JOSEAlgNotAllowed) {
    return refused(401, "algorithm_not_allowed", "the token's algorithm is not allowed");
  }
  if (error instanceof joseErrors.JWSSignatureVerificationFailed) {
    return refused(401, "bad_signature", "the token's signature does not verify");
  }
  if (error instanceof UnknownKey) {
    return refused(401, "unknown_key", "the token's key is not one of the issuer's");
  }
  if (error instanceof KeysUnavailable) {
    return refused(401, "keys_unavailable", "the issuer's keys cannot be read");
  }
  if (error instanceof joseErrors.JOSENotSupported) {
    return refused(401, "algorithm_not_allowed", "the token's algorithm or key is not supported");
  }
  // JWSInvalid, JWTInvalid, a key that does not fit the algorithm: not a token we can trust.
  return refused(401, "malformed", "the token cannot be verified");
}

/** The principal the claims map to, or the sentence saying which part did not map. */
function mapClaims(payload: JWTPayload, map: ClaimMap): TokenIdentity | string {
  const parts: Record<string, string> = {};
  // Every configured part must map, optional ones too: a principal missing its configured
  // owner or purpose would be a wider one than the configuration describes.
  for (const [part, source] of Object.entries(map) as [keyof ClaimMap, ClaimSource | undefined][]) {
    if (source === undefined) continue;
    const value = "value" in source ? source.value : claimAt(payload, source.claim);
    if (value === undefined) {
      return `the claim ${"claim" in source ? source.claim : "?"} (${part}) is missing or not a string`;
    }
    parts[part] = value;
  }
  const role = parts.role;
  if (role !== "agent" && role !== "issuer") {
    return "the role claim reads neither agent nor issuer";
  }
  // Frozen: a cached identity is handed to every request that presents the same token.
  return Object.freeze({
    namespaceId: parts.namespaceId as string,
    actor: parts.actor as string,
    authority: parts.authority as string,
    role,
    scopes: Object.freeze(scopesOf(payload)),
    ...(parts.owner === undefined ? {} : { owner: parts.owner }),
    ...(parts.purpose === undefined ? {} : { purpose: parts.purpose }),
    ...(parts.session === undefined ? {} : { session: parts.session }),
  });
}

/** A string claim by name or dotted path; undefined when absent, empty, too long or not a string. */
function claimAt(payload: JWTPayload, path: string): string | undefined {
  let node: unknown = payload;
  for (const step of path.split(".")) {
    if (typeof node !== "object" || node === null || !Object.hasOwn(node, step)) return undefined;
    node = (node as Record<string, unknown>)[step];
  }
  return typeof node === "string" && node.length > 0 && node.length <= 512 ? node : undefined;
}

/**
 * `scope` is a space-separated string (RFC 9068); `scp` is an array for some providers and a
 * space-separated string for others (Microsoft Entra ID): all three read the same.
 */
function scopesOf(payload: JWTPayload): string[] {
  if (typeof payload.scope === "string") return payload.scope.split(" ").filter(Boolean);
  if (typeof payload.scp === "string") return payload.scp.split(" ").filter(Boolean);
  if (Array.isArray(payload.scp)) return payload.scp.filter((s) => typeof s === "string");
  return [];
}
