import { open } from "node:fs/promises";
import { TesseraError } from "@tessera/core";
import { octalMode, WRITABLE_BY_OTHERS } from "@tessera/core/store-kit";
import {
  createLocalJWKSet,
  type FlattenedJWSInput,
  type JSONWebKeySet,
  type JWSHeaderParameters,
  errors as joseErrors,
} from "jose";
import { readUnwritableByOthers } from "./config.js";

/**
 * The largest JWKS read, over HTTP or from a file. A real set is a few KiB (a handful of keys);
 * without a cap, an endpoint answering 400 MB was read whole into memory and stalled the
 * service. Past it the load fails like any other: the keys held stay in force.
 */
export const MAX_JWKS_BYTES = 1024 * 1024;

/** Why no key could be chosen: the token names a key the issuer does not (or no longer) publish. */
export class UnknownKey extends Error {}
/** The key set was never fetched: nothing can be verified (fail closed). */
export class KeysUnavailable extends Error {}

export interface KeySetOptions {
  /** Reads the key set: the issuer's JWKS endpoint, or a file. Throws when it cannot. */
  readonly load: () => Promise<JSONWebKeySet>;
  /**
   * At most one load per this many ms, whatever the traffic: after a failed load too, so an
   * issuer that is down at start is not asked again by every request.
   */
  readonly refetchMs: number;
  /** A key set older than this is reloaded in the background; on failure the old one stays. */
  readonly maxAgeMs: number;
  readonly now?: () => number;
  /** Told about every load that failed (never a token): the service logs it. */
  readonly onLoadError?: (error: unknown) => void;
  /** Told after each load that replaced the set: the verified-token cache drops what it lost. */
  readonly onReplaced?: () => void;
  /** A set already read (a `jwksFile` checked at start): in force at once, and a load's attempt. */
  readonly initial?: JSONWebKeySet;
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
    if (options.initial !== undefined) {
      this.#lastAttempt = this.#now();
      this.#replace(options.initial);
    }
  }

  /** The key for this token's header, for jose's `jwtVerify`. */
  readonly key = async (header: JWSHeaderParameters, token: FlattenedJWSInput) => {
    if (this.#local === undefined) {
      // Within `refetchMs` of a failed load this answers at once: no set, no fetch, fail closed.
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

  /**
   * One load at a time, and none within `refetchMs` of the last attempt, failed or not: a
   * failed load is what a flood of requests would otherwise repeat (the issuer down at start).
   */
  #reload(): Promise<void> {
    if (this.#loading !== undefined) return this.#loading;
    if (this.#stillLimited()) return Promise.resolve();
    this.#lastAttempt = this.#now();
    this.#loading = this.#options
      .load()
      .then(
        (jwks) => {
          this.#replace(jwks);
          this.#options.onReplaced?.();
        },
        (error: unknown) => this.#options.onLoadError?.(error),
      )
      .finally(() => {
        this.#loading = undefined;
      });
    return this.#loading;
  }

  #replace(jwks: JSONWebKeySet): void {
    this.#local = createLocalJWKSet(jwks);
    this.#kids = new Set(
      jwks.keys.map((k) => k.kid).filter((kid): kid is string => typeof kid === "string"),
    );
    this.#generation++;
    this.#loadedAt = this.#now();
  }
}

/**
 * Reads a JWKS over HTTP(S); anything but a 200 with a `keys` array of public keys throws. One
 * deadline covers the whole exchange, body included: an endpoint that sends its headers and
 * then dribbles the body must not hold the load (and every request waiting on it) past
 * `timeoutMs`. The body is read up to `MAX_JWKS_BYTES` and no further.
 */
export function jwksFromUrl(url: string, timeoutMs: number): () => Promise<JSONWebKeySet> {
  return async () => {
    const signal = AbortSignal.timeout(timeoutMs);
    const response = await fetch(url, {
      headers: { accept: "application/jwk-set+json, application/json" },
      signal,
      redirect: "error",
    });
    if (!response.ok) {
      await response.body?.cancel().catch(() => {});
      throw new Error(`the JWKS endpoint answered ${response.status}`);
    }
    return keySet(JSON.parse(await cappedBody(response, signal)));
  };
}

/** The body as text, refused (and the connection dropped) past `MAX_JWKS_BYTES`. */
async function cappedBody(response: Response, signal: AbortSignal): Promise<string> {
  const tooLarge = () => new Error(`the JWKS is larger than ${MAX_JWKS_BYTES} bytes`);
  if (Number(response.headers.get("content-length") ?? 0) > MAX_JWKS_BYTES) {
    await response.body?.cancel().catch(() => {});
    throw tooLarge();
  }
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  // The fetch's signal ends a body read in progress too; this makes sure of it whatever the
  // fetch implementation does, since a stalled read is the failure the deadline is for.
  const onAbort = () => void reader.cancel(signal.reason).catch(() => {});
  signal.addEventListener("abort", onAbort, { once: true });
  try {
    signal.throwIfAborted();
    const chunks: Uint8Array[] = [];
    let length = 0;
    for (;;) {
      const { done, value } = await reader.read();
      signal.throwIfAborted();
      if (done) break;
      length += value.byteLength;
      if (length > MAX_JWKS_BYTES) {
        await reader.cancel().catch(() => {});
        throw tooLarge();
      }
      chunks.push(value);
    }
    return Buffer.concat(chunks, length).toString("utf8");
  } finally {
    signal.removeEventListener("abort", onAbort);
  }
}

/**
 * Reads a JWKS file again (a token names a key the set lacks), with the checks it had at start
 * (`readJwksFileNow`): refused when group or others may write it, or when too large.
 */
export function jwksFromFile(path: string): () => Promise<JSONWebKeySet> {
  return async () => {
    const file = await open(path, "r");
    try {
      const { mode, size } = await file.stat();
      if ((mode & WRITABLE_BY_OTHERS) !== 0) {
        throw new Error(
          `the JWKS file at ${path} is mode ${octalMode(mode & 0o777)}: chmod 644 ${path}`,
        );
      }
      if (size > MAX_JWKS_BYTES) throw new Error(`the JWKS file at ${path} is too large`);
      return keySet(JSON.parse(await file.readFile("utf8")));
    } finally {
      await file.close();
    }
  };
}

/**
 * Reads and checks a JWKS file when the identity is put in force (start, SIGHUP): a missing
 * file, or one holding a private key, is `invalid_config` there, rather than a service that
 * starts (or reloads) fine and then refuses every token with `keys_unavailable`.
 */
export function readJwksFileNow(path: string): JSONWebKeySet {
  let text: string;
  try {
    text = readUnwritableByOthers(path, "the JWKS file");
  } catch (error) {
    if (error instanceof TesseraError) throw error;
    const code = (error as NodeJS.ErrnoException).code;
    throw new TesseraError(
      "invalid_config",
      code === "ENOENT" || code === "ENOTDIR"
        ? `jwksFile: no JWKS file at ${path}`
        : `jwksFile: the JWKS file at ${path} cannot be read (${code ?? "unknown error"})`,
      { cause: error },
    );
  }
  try {
    if (Buffer.byteLength(text) > MAX_JWKS_BYTES) {
      throw new Error(`it is larger than ${MAX_JWKS_BYTES} bytes`);
    }
    const jwks = keySet(JSON.parse(text));
    // Built once here so a malformed set is refused now, not at the first token.
    createLocalJWKSet(jwks);
    return jwks;
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new TesseraError("invalid_config", `jwksFile: the JWKS file at ${path}: ${reason}`, {
      cause: error,
    });
  }
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
