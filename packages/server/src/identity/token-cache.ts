import * as crypto from "node:crypto";

/**
 * Tokens already verified, so a host that reuses one access token for many requests pays the
 * signature check (ES256/RS256: tens to hundreds of µs) once. Keyed by the token's SHA-256:
 * the token itself is never held as a key, never logged. Only a successful verification is
 * kept (a refused token is verified again every time it comes), and a kept one is re-judged on
 * every use by what can change while it sits here:
 *
 * - the clock: `exp` and `nbf` are checked again with the configured skew, so an expired
 *   token is refused even when its signature was checked a minute ago;
 * - the issuer's keys: an entry holds the `kid` that signed it, and is served only while the
 *   key set in force still holds that kid (a key the issuer removed stops its tokens at the
 *   reload that removed it). A token without a `kid` is served only until the next reload;
 * - the configuration: a new issuer, audience or claim mapping clears the whole cache.
 *
 * Bounded: least recently used first out, so a flood of distinct valid tokens costs memory of
 * at most `maxEntries` principals.
 */
export interface CachedVerification<T> {
  readonly value: T;
  /** Seconds since the epoch, as the token's claims say. */
  readonly exp: number;
  readonly nbf?: number;
  /** The key that signed it; undefined when the token named none. */
  readonly kid?: string;
  /** The key set's generation it was verified under (for tokens without a kid). */
  readonly generation: number;
}

/** What the cache asks of the key set: which kids it holds now, and how often it was replaced. */
export interface KeyGeneration {
  readonly generation: number;
  holds(kid: string): boolean;
}

export type CacheLookup<T> =
  | { readonly found: true; readonly value: T }
  | { readonly found: false; readonly expired?: "expired" | "not_yet_valid" };

export const DEFAULT_CACHE_ENTRIES = 1024;

export class VerifiedTokenCache<T> {
  readonly #max: number;
  /** Insertion order is recency order: a hit is deleted and set again. */
  readonly #entries = new Map<string, CachedVerification<T>>();
  #hits = 0;

  constructor(maxEntries = DEFAULT_CACHE_ENTRIES) {
    this.#max = maxEntries;
  }

  /** The cache's key for a token: its SHA-256, hex. */
  static digest(token: string): string {
    return typeof crypto.hash === "function"
      ? crypto.hash("sha256", token, "hex")
      : crypto.createHash("sha256").update(token).digest("hex");
  }

  /**
   * The value kept for this digest when it still holds at `nowSeconds`. An entry whose time
   * ran out, or whose key is gone, is dropped; a token past `exp` is said to be expired (the
   * caller refuses it without verifying again: a signature cannot make it valid).
   */
  get(digest: string, nowSeconds: number, skew: number, keys: KeyGeneration): CacheLookup<T> {
    const entry = this.#entries.get(digest);
    if (entry === undefined) return { found: false };
    // The same comparisons as jose's jwtVerify, so a cached token expires exactly when an
    // uncached one would.
    if (entry.exp <= nowSeconds - skew) {
      this.#entries.delete(digest);
      return { found: false, expired: "expired" };
    }
    if (entry.nbf !== undefined && entry.nbf > nowSeconds + skew) {
      return { found: false, expired: "not_yet_valid" };
    }
    const keyHeld =
      entry.kid === undefined ? entry.generation === keys.generation : keys.holds(entry.kid);
    if (!keyHeld) {
      this.#entries.delete(digest);
      return { found: false };
    }
    this.#entries.delete(digest);
    this.#entries.set(digest, entry);
    this.#hits++;
    return { found: true, value: entry.value };
  }

  /** Keeps a successful verification, unless its key was replaced while it was being checked. */
  set(digest: string, entry: CachedVerification<T>, keys: KeyGeneration): void {
    if (entry.kid === undefined ? entry.generation !== keys.generation : !keys.holds(entry.kid)) {
      return;
    }
    this.#entries.delete(digest);
    this.#entries.set(digest, entry);
    if (this.#entries.size > this.#max) {
      const oldest = this.#entries.keys().next().value as string;
      this.#entries.delete(oldest);
    }
  }

  /** After a key-set reload: entries of keys no longer held (and of no kid) go now. */
  prune(keys: KeyGeneration): void {
    for (const [digest, entry] of this.#entries) {
      if (entry.kid === undefined ? entry.generation !== keys.generation : !keys.holds(entry.kid)) {
        this.#entries.delete(digest);
      }
    }
  }

  clear(): void {
    this.#entries.clear();
  }

  get size(): number {
    return this.#entries.size;
  }

  /** Requests answered from the cache, for tests and metrics. */
  get hits(): number {
    return this.#hits;
  }
}
