import { TesseraError } from "@tessera/core";

/**
 * How long a client may hold a connection of the stand-alone server, in milliseconds. Fastify
 * turns Node's own request timeout off (0) unless told otherwise, so without these a client
 * that sends its body one byte a second keeps its socket, and a slot, for as long as it likes.
 * They bound receiving a request only: a request fully received is answered however long the
 * answer takes (a webhook delivery or an A2UI call has its own timeout).
 */
export interface ServerTimeouts {
  /** From the connection (or the end of the last answer) to the end of the headers. */
  readonly headersTimeoutMs?: number;
  /** From the connection to the last byte of the body: the whole request. */
  readonly requestTimeoutMs?: number;
  /** An idle kept-alive connection between two requests. */
  readonly keepAliveTimeoutMs?: number;
  /**
   * No byte either way for this long, at any point, and the socket is closed: a backstop that
   * also cuts an answer still being prepared, so keep it above the longest one (the webhook and
   * A2UI call timeouts, at most 120 s each).
   */
  readonly connectionTimeoutMs?: number;
}

export const DEFAULT_TIMEOUTS = Object.freeze({
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  // Fastify's own default, kept: a proxy in front must close its idle upstream sockets first.
  keepAliveTimeoutMs: 72_000,
  connectionTimeoutMs: 300_000,
}) satisfies Required<ServerTimeouts>;

const MAX_MS = 3_600_000;

/** The timeouts with defaults filled in, checked: whole milliseconds, headers within request. */
export function serverTimeouts(given: ServerTimeouts = {}): Required<ServerTimeouts> {
  const t: { -readonly [K in keyof ServerTimeouts]-?: number } = { ...DEFAULT_TIMEOUTS };
  for (const key of Object.keys(DEFAULT_TIMEOUTS) as (keyof ServerTimeouts)[]) {
    const value = given[key];
    if (value === undefined) continue;
    if (!Number.isInteger(value) || value < 1 || value > MAX_MS) {
      throw new TesseraError(
        "invalid_config",
        `${key}: expected whole milliseconds, 1 to ${MAX_MS}`,
      );
    }
    t[key] = value;
  }
  if (t.headersTimeoutMs > t.requestTimeoutMs) {
    throw new TesseraError(
      "invalid_config",
      `headersTimeoutMs (${t.headersTimeoutMs}) exceeds requestTimeoutMs (${t.requestTimeoutMs}): the headers are part of the request`,
    );
  }
  return t;
}

/** The Fastify options (and Node server options) that enforce them. */
export function fastifyTimeouts(t: Required<ServerTimeouts>) {
  return {
    connectionTimeout: t.connectionTimeoutMs,
    keepAliveTimeout: t.keepAliveTimeoutMs,
    requestTimeout: t.requestTimeoutMs,
    http: {
      headersTimeout: t.headersTimeoutMs,
      // Node checks the header and request deadlines on this tick (default 30 s, which would let
      // a slow client outlive a 10 s limit threefold): a connection is cut within a second of it.
      connectionsCheckingInterval: Math.min(1000, t.headersTimeoutMs),
    },
  };
}
