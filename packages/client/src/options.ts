import type { ROUTES, RouteName } from "@tessera/core/http";
import type { z } from "zod";
import type { RetryPolicy } from "./retry.js";

/* What a client is made with and what its methods take and answer: the public types. */

export interface TesseraClientOptions {
  /** The service's base URL: `http://127.0.0.1:8787`. */
  readonly url: string;
  /** The bearer token that names the principal (agent or issuer). */
  readonly token?: string;
  /** Each attempt's deadline in ms: a whole number from 1 to 2^31 − 1 (default 10 000). */
  readonly timeoutMs?: number;
  readonly retry?: RetryPolicy;
  /**
   * The most bytes of an answer's body the client reads (default 64 MiB): a longer body is an
   * `invalid_response`, not retried, and its rest is never read.
   */
  readonly maxResponseBytes?: number;
  /** A fetch to use instead of the global one (a proxy agent, a test double). */
  readonly fetch?: typeof fetch;
}

/** What a route answers with 200, as its shared schema says. */
export type RouteResponse<N extends RouteName> = z.output<(typeof ROUTES)[N]["response"]>;

/**
 * What a decision route answers, with a refusal's call ID: the service sends none in a denial,
 * but this client knows the one its request carried (the caller's, or the one it made up), and
 * without it a caller could not `explain` a refusal whose ID it never saw.
 */
export type DecisionResponse<N extends "authorize" | "sendMessage"> =
  | Exclude<RouteResponse<N>, { status: "denied" }>
  | (Extract<RouteResponse<N>, { status: "denied" }> & { readonly callId?: string });

/** Per-call options every method takes last. */
export interface CallOptions {
  /** Aborting stops the call and its retries; the abort's reason is thrown as is. */
  readonly signal?: AbortSignal;
}
