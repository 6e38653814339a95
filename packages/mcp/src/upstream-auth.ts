import { TesseraError } from "@tessera/core";
import { octalMode, readPrivateFile } from "@tessera/core/store-kit";
import { ClientCredentialsSchema, type ClientCredentialsSpec } from "./config.js";

/*
 * An HTTP upstream's own access token, by OAuth client credentials (RFC 6749 §4.4). The gateway
 * is the client: it never forwards a caller's token, so each upstream sees only the credential
 * configured for it. One token is shared by every call to that upstream until shortly before it
 * expires; the token endpoint is asked at most once at a time, not again for a while after it
 * failed, and a 401 from the upstream replaces the token at most once a second.
 */

/** No token could be had: the request was never sent. Its message names the endpoint and cause. */
export class UpstreamTokenError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "UpstreamTokenError";
  }
}

/** A token endpoint that takes longer than this is given up on (the call fails, nothing sent). */
const TOKEN_TIMEOUT_MS = 10_000;
/** A token without `expires_in` is used this long (RFC 6749 makes it only recommended). */
const DEFAULT_LIFETIME_S = 300;
/** A token is replaced this much before it expires, at most: a call never carries a dying one. */
const MAX_EARLY_S = 30;
/** A 401 replaces a token only once it is this old: a misconfigured upstream cannot flood the endpoint. */
const MIN_REFETCH_MS = 1_000;
/** After a failed token request, none for this long, doubling on each failure up to the cap. */
const FIRST_BACKOFF_MS = 1_000;
const MAX_BACKOFF_MS = 30_000;
const MAX_TOKEN_CHARS = 16_384;

interface Held {
  readonly token: string;
  readonly fetchedAt: number;
  readonly refreshAt: number;
}

export class ClientCredentials {
  readonly #spec: ClientCredentialsSpec;
  readonly #now: () => number;
  /** The token endpoint as named in errors: no query, no user information. */
  readonly #where: string;
  #held: Held | undefined;
  #pending: Promise<string> | undefined;
  #failures = 0;
  #notBefore = 0;
  #lastError: UpstreamTokenError | undefined;

  constructor(spec: ClientCredentialsSpec, now: () => number = Date.now) {
    const parsed = ClientCredentialsSchema.safeParse(spec);
    if (!parsed.success) {
      const where = parsed.error.issues
        .map((issue) => `auth.${issue.path.join(".")}: ${issue.message}`)
        .join("; ");
      throw new TesseraError("invalid_config", `an upstream's auth does not match: ${where}`);
    }
    this.#spec = parsed.data;
    this.#now = now;
    const url = new URL(parsed.data.tokenUrl);
    url.username = "";
    url.password = "";
    url.search = "";
    url.hash = "";
    this.#where = url.href;
  }

  /** The token to send: the held one while it is fresh, else a new one. */
  token(): Promise<string> {
    const held = this.#held;
    if (held !== undefined && this.#now() < held.refreshAt) return Promise.resolve(held.token);
    return this.#fetch();
  }

  /**
   * The upstream answered 401 to `token`: a new token to retry with once, or undefined when
   * this one is too young to be replaced (the 401 then stands).
   */
  refused(token: string): Promise<string | undefined> {
    const held = this.#held;
    // Another call replaced it already: retry with the replacement.
    if (held !== undefined && held.token !== token) return this.token();
    if (held !== undefined && this.#now() - held.fetchedAt < MIN_REFETCH_MS) {
      return Promise.resolve(undefined);
    }
    this.#held = undefined;
    return this.#fetch();
  }

  #fetch(): Promise<string> {
    if (this.#pending !== undefined) return this.#pending;
    if (this.#lastError !== undefined && this.#now() < this.#notBefore) {
      return Promise.reject(this.#lastError);
    }
    this.#pending = this.#request().then(
      (held) => {
        this.#held = held;
        this.#failures = 0;
        this.#lastError = undefined;
        return held.token;
      },
      (error: unknown) => {
        const failed =
          error instanceof UpstreamTokenError
            ? error
            : new UpstreamTokenError(this.#why("failed"), { cause: error });
        this.#failures++;
        this.#notBefore =
          this.#now() + Math.min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS * 2 ** (this.#failures - 1));
        this.#lastError = failed;
        throw failed;
      },
    );
    this.#pending.then(
      () => (this.#pending = undefined),
      () => (this.#pending = undefined),
    );
    return this.#pending;
  }

  async #request(): Promise<Held> {
    const spec = this.#spec;
    const secret = readSecret(spec);
    const body = new URLSearchParams({ grant_type: "client_credentials" });
    if (spec.scope !== undefined) body.set("scope", spec.scope);
    if (spec.resource !== undefined) body.set("resource", spec.resource);
    if (spec.audience !== undefined) body.set("audience", spec.audience);
    const headers: Record<string, string> = {
      "content-type": "application/x-www-form-urlencoded",
      accept: "application/json",
    };
    if (spec.method === "client_secret_post") {
      body.set("client_id", spec.clientId);
      body.set("client_secret", secret);
    } else {
      // RFC 6749 §2.3.1: both are form-encoded before they are joined for Basic.
      const pair = `${formEncode(spec.clientId)}:${formEncode(secret)}`;
      headers.authorization = `Basic ${Buffer.from(pair).toString("base64")}`;
    }
    const started = this.#now();
    let reply: Response;
    try {
      reply = await fetch(spec.tokenUrl, {
        method: "POST",
        headers,
        body: body.toString(),
        // A redirect would carry the secret elsewhere.
        redirect: "error",
        signal: AbortSignal.timeout(TOKEN_TIMEOUT_MS),
      });
    } catch (error) {
      throw new UpstreamTokenError(this.#why(`could not be reached (${reason(error)})`), {
        cause: error,
      });
    }
    let answer: Record<string, unknown> | undefined;
    try {
      const parsed = (await reply.json()) as unknown;
      if (typeof parsed === "object" && parsed !== null) answer = parsed as Record<string, unknown>;
    } catch {
      answer = undefined;
    }
    if (!reply.ok) {
      const code = oauthCode(answer?.error);
      throw new UpstreamTokenError(
        this.#why(`answered HTTP ${reply.status}${code === undefined ? "" : ` (${code})`}`),
      );
    }
    const token = answer?.access_token;
    if (typeof token !== "string" || token.length === 0 || token.length > MAX_TOKEN_CHARS) {
      throw new UpstreamTokenError(this.#why("answered without a usable access_token"));
    }
    const type = answer?.token_type;
    if (type !== undefined && (typeof type !== "string" || type.toLowerCase() !== "bearer")) {
      throw new UpstreamTokenError(this.#why("answered a token that is not a bearer token"));
    }
    const expires = Number(answer?.expires_in ?? DEFAULT_LIFETIME_S);
    const lifetime = Number.isFinite(expires) && expires > 0 ? expires : DEFAULT_LIFETIME_S;
    const early = Math.min(MAX_EARLY_S, lifetime / 10);
    return { token, fetchedAt: started, refreshAt: started + (lifetime - early) * 1000 };
  }

  #why(cause: string): string {
    return `no token for the upstream: the token endpoint ${this.#where} ${cause}`;
  }
}

/**
 * The client secret, read at each token request (a rotated file is picked up). A file must be
 * private to its owner (mode 0600), as every secret file of Tessera's: one others may read is
 * refused. Errors name the file or variable, never its content.
 */
function readSecret(spec: ClientCredentialsSpec): string {
  if (spec.clientSecretEnv !== undefined) {
    const value = process.env[spec.clientSecretEnv]?.trim();
    if (value === undefined || value === "") {
      throw new UpstreamTokenError(
        `no token for the upstream: the environment variable ${spec.clientSecretEnv} (its client secret) is not set`,
      );
    }
    return value;
  }
  const path = spec.clientSecretFile as string;
  const read = readPrivateFile(path);
  if (read.status === "open_to_others") {
    throw new UpstreamTokenError(
      `no token for the upstream: the client secret file ${path} is mode ${octalMode(read.mode)}: others may read it; chmod 600 ${path}`,
    );
  }
  if (read.status !== "read") {
    const code = read.status === "missing" ? "ENOENT" : read.code;
    throw new UpstreamTokenError(
      `no token for the upstream: the client secret file ${path} cannot be read (${code})`,
    );
  }
  const text = read.text;
  const secret = text.trim();
  if (secret === "") {
    throw new UpstreamTokenError(
      `no token for the upstream: the client secret file ${path} is empty`,
    );
  }
  return secret;
}

function formEncode(value: string): string {
  return new URLSearchParams({ v: value }).toString().slice(2);
}

/** An OAuth error code (RFC 6749 §5.2: printable ASCII without " and \), else nothing. */
function oauthCode(value: unknown): string | undefined {
  return typeof value === "string" && /^[\x20\x21\x23-\x5b\x5d-\x7e]{1,64}$/.test(value)
    ? value
    : undefined;
}

/** fetch's own error says only "fetch failed": its cause's code or message says why. */
function reason(error: unknown): string {
  const cause = (error as { cause?: { code?: unknown; message?: unknown } } | null)?.cause;
  if (typeof cause?.code === "string") return cause.code;
  if (error instanceof Error && error.name === "TimeoutError")
    return `no answer in ${TOKEN_TIMEOUT_MS} ms`;
  if (typeof cause?.message === "string") return cause.message;
  return error instanceof Error ? error.message : "unknown error";
}
