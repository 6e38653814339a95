import { readFile } from "node:fs/promises";
import {
  createLocalJWKSet,
  type FlattenedJWSInput,
  type JSONWebKeySet,
  type JWSHeaderParameters,
  errors as joseErrors,
} from "jose";

/** Why no key could be chosen: the token names a key the issuer does not (or no longer) publish. */
export class UnknownKey extends Error {}
/** The key set was never fetched: nothing can be verified (fail closed). */
export class KeysUnavailable extends Error {}

export interface KeySetOptions {
  /** Reads the key set: the issuer's JWKS endpoint, or a file. Throws when it cannot. */
  readonly load: () => Promise<JSONWebKeySet>;
  /** At most one load per this many ms when tokens name unknown keys. */
  readonly refetchMs: number;
  /** A key set older than this is reloaded in the background; on failure the old one stays. */
  readonly maxAgeMs: number;
  readonly now?: () => number;
  /** Told about every load that failed (never a token): the service logs it. */
  readonly onLoadError?: (error: unknown) => void;
  /** Told after each load that replaced the set: the verified-token cache drops what it lost. */
  readonly onReplaced?: () => void;
}

type Local = ReturnType<typeof createLocalJWKSet>;

/**
 * The issuer's public keys, cached. A token naming a `kid` the cache lacks triggers one
 * reload, at most once per `refetchMs` whatever the traffic (a flood of made-up `kid`s costs
 * the issuer one request per interval); tokens racing for it share it. A reload replaces the
 * whole set, so a key the issuer removed is refused from then on. When the issuer cannot be
 * reached the keys already held keep working, and an unknown key fails closed.
 */
export class CachedKeySet {
  readonly #options: KeySetOptions;
  readonly #now: () => number;
  #local: Local | undefined;
  /** The kids of the set in force: a cached token is served only while its kid is here. */
  #kids: ReadonlySet<string> = new Set();
  #generation = 0;
  #loadedAt = 0;
  #lastAttempt = Number.NEGATIVE_INFINITY;
  #loading: Promise<void> | undefined;

  constructor(options: KeySetOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
  }

  /** The key for this token's header, for jose's `jwtVerify`. */
  readonly key = async (header: JWSHeaderParameters, token: FlattenedJWSInput) => {
    if (this.#local === undefined) {
      await this.#reload();
      if (this.#local === undefined) throw new KeysUnavailable("the issuer's keys cannot be read");
    } else {
      this.freshen();
    }
    try {
      return await (this.#local as Local)(header, token);
    } catch (error) {
      if (!(error instanceof joseErrors.JWKSNoMatchingKey)) throw error;
    }
    // Unknown here: one reload (unless one ran within `refetchMs`), then the key or nothing.
    await this.#reload();
    try {
      return await (this.#local as Local)(header, token);
    } catch (error) {
      if (error instanceof joseErrors.JWKSNoMatchingKey) {
        throw new UnknownKey("no key of the issuer matches the token's kid");
      }
      throw error;
    }
  };

  /**
   * A set older than `maxAgeMs` is reloaded beside the request, never in its way. Called on
   * cache hits too: traffic answered from the cache must still notice a key the issuer removed.
   */
  freshen(): void {
    if (this.#local !== undefined && this.#now() - this.#loadedAt > this.#options.maxAgeMs) {
      void this.#reload();
    }
  }

  /** Bumped by every load that replaced the set. */
  get generation(): number {
    return this.#generation;
  }

  holds(kid: string): boolean {
    return this.#kids.has(kid);
  }

  #stillLimited(): boolean {
    return this.#now() - this.#lastAttempt < this.#options.refetchMs;
  }

  /** One load at a time, and none within `refetchMs` of the last attempt (after the first). */
  #reload(): Promise<void> {
    if (this.#loading !== undefined) return this.#loading;
    if (this.#local !== undefined && this.#stillLimited()) return Promise.resolve();
    this.#lastAttempt = this.#now();
    this.#loading = this.#options
      .load()
      .then(
        (jwks) => {
          this.#local = createLocalJWKSet(jwks);
          this.#kids = new Set(
            jwks.keys.map((k) => k.kid).filter((kid): kid is string => typeof kid === "string"),
          );
          this.#generation++;
          this.#loadedAt = this.#now();
          this.#options.onReplaced?.();
        },
        (error: unknown) => this.#options.onLoadError?.(error),
      )
      .finally(() => {
        this.#loading = undefined;
      });
    return this.#loading;
  }
}

/** Reads a JWKS over HTTP(S) with a deadline; anything but a 200 with a `keys` array throws. */
export function jwksFromUrl(url: string, timeoutMs: number): () => Promise<JSONWebKeySet> {
  return async () => {
    const response = await fetch(url, {
      headers: { accept: "application/jwk-set+json, application/json" },
      signal: AbortSignal.timeout(timeoutMs),
      redirect: "error",
    });
    if (!response.ok) throw new Error(`the JWKS endpoint answered ${response.status}`);
    return keySet(await response.json());
  };
}

export function jwksFromFile(path: string): () => Promise<JSONWebKeySet> {
  return async () => keySet(JSON.parse(await readFile(path, "utf8")));
}

function keySet(value: unknown): JSONWebKeySet {
  const keys = (value as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys)) throw new Error("the JWKS has no keys array");
  // Private parts are never needed to verify; a set that carries them is a mistake to refuse.
  for (const key of keys as Record<string, unknown>[]) {
    if (typeof key !== "object" || key === null || "d" in key || key.kty === "oct") {
      throw new Error("the JWKS holds a private or symmetric key");
    }
  }
  return { keys } as JSONWebKeySet;
}
