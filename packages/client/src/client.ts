import { randomUUID } from "node:crypto";
import {
  type A2uiClaimRequest,
  type A2uiSettleRequest,
  type AuditQuery,
  type AuthorizeRequestBody,
  type DeriveGrantRequest,
  ErrorBodySchema,
  type IssueGrantRequest,
  ROUTES,
  type RouteName,
  readBoundedText,
  type SendMessageRequestBody,
} from "@tessera/core/http";
import { AttemptError, TesseraClientError } from "./errors.js";
import {
  describeNetworkError,
  describeRedirect,
  eitherSignal,
  isRedirect,
  isRefusedBeforeSending,
  redactedUrl,
  sleep,
} from "./fetch-failures.js";
import type {
  CallOptions,
  DecisionResponse,
  RouteResponse,
  TesseraClientOptions,
} from "./options.js";
import { type RequestParts, requestBody, requestUrl, settleBody } from "./request.js";
import {
  backoffMs,
  parseRetryAfter,
  RETRYABLE_STATUSES,
  type ResolvedRetry,
  resolveRetry,
} from "./retry.js";
import {
  checkedBaseUrl,
  checkedMaxResponseBytes,
  checkedTimeoutMs,
  checkedToken,
} from "./settings.js";

interface CallInput extends RequestParts {
  readonly signal?: AbortSignal;
}

/**
 * The Tessera service over HTTP: one method per route. Every 200 body is checked against the
 * route's schema from `@tessera/core/http` (the one the server validates with), so a drifted or
 * impostor service is an `invalid_response`, not a silently wrong value.
 *
 * A refusal is a normal return (`status: "denied"`); only "no usable answer" throws
 * (`TesseraClientError`). Reads are retried on a dropped connection, a timeout and 429/502/503/
 * 504, with full-jitter backoff; so are sends and authorizations, which are made retry-safe by
 * a call ID (a fresh UUID when the caller gives none): the service answers a repeated call ID
 * with the original decision, so nothing is decided, spent or delivered twice. The A2UI gate and
 * grant changes are never retried: their repeats are answered as refusals, not as the original.
 */
export class TesseraClient {
  readonly #base: string;
  readonly #token: string | undefined;
  readonly #timeoutMs: number;
  readonly #retry: ResolvedRetry;
  readonly #maxResponseBytes: number;
  readonly #fetch: typeof fetch;

  /**
   * Checks the options here, once: a URL or token fetch cannot send would otherwise surface on
   * the first call, after its retries, as if the service were down.
   */
  constructor(options: TesseraClientOptions) {
    this.#base = checkedBaseUrl(options.url);
    this.#token = checkedToken(options.token);
    this.#timeoutMs = checkedTimeoutMs(options.timeoutMs);
    this.#retry = resolveRetry(options.retry);
    this.#maxResponseBytes = checkedMaxResponseBytes(options.maxResponseBytes);
    this.#fetch = options.fetch ?? globalThis.fetch;
  }

  health(options?: CallOptions): Promise<RouteResponse<"health">> {
    return this.#call("health", { ...options });
  }

  ready(options?: CallOptions): Promise<RouteResponse<"ready">> {
    return this.#call("ready", { ...options });
  }

  /** The tools this principal may see now (a spent send ticket hides the send tool). */
  tools(options?: CallOptions): Promise<RouteResponse<"tools">> {
    return this.#call("tools", { ...options });
  }

  /** `allowed` with the grant and call ID, or `denied` with a code and the request's call ID. */
  authorize(
    request: AuthorizeRequestBody,
    options?: CallOptions,
  ): Promise<DecisionResponse<"authorize">> {
    return this.#decide("authorize", this.#withCallId(request), options);
  }

  /**
   * Decided, spent and delivered once: `delivered` with the reply, or `denied` with a code and
   * the request's call ID.
   */
  sendMessage(
    request: SendMessageRequestBody,
    options?: CallOptions,
  ): Promise<DecisionResponse<"sendMessage">> {
    return this.#decide("sendMessage", this.#withCallId(request), options);
  }

  /** Claims an A2UI call: the refusal reply to send, or a handle to settle after running it. */
  a2uiClaim(request: A2uiClaimRequest, options?: CallOptions): Promise<RouteResponse<"a2uiClaim">> {
    return this.#call("a2uiClaim", { body: request, ...options });
  }

  /**
   * Settles a claimed call with the function's value or error; returns the reply to send. A
   * function that returned nothing (`value: undefined`) settles with `value: null`, as the
   * Python client's `None` does: `JSON.stringify` would drop the key, and the service refuses
   * a settle with neither a value nor an error, leaving the claimed call open.
   */
  a2uiSettle(
    request: A2uiSettleRequest,
    options?: CallOptions,
  ): Promise<RouteResponse<"a2uiSettle">> {
    return this.#call("a2uiSettle", { body: settleBody(request), ...options });
  }

  /** One step: the service claims, calls the host's function endpoint and settles. */
  a2uiCall(request: A2uiClaimRequest, options?: CallOptions): Promise<RouteResponse<"a2uiCall">> {
    return this.#call("a2uiCall", { body: request, ...options });
  }

  /** "Spent" or "never granted" (and revoked, expired, …) for one of this principal's calls. */
  explain(callId: string, options?: CallOptions): Promise<RouteResponse<"explain">> {
    return this.#call("explain", {
      query: { callId },
      queryIds: { callId: "required" },
      ...options,
    });
  }

  /** This principal's audit events for one call ID or one trace ID. */
  audit(query: AuditQuery, options?: CallOptions): Promise<RouteResponse<"audit">> {
    return this.#call("audit", {
      query,
      queryIds: { callId: "optional", traceId: "optional" },
      ...options,
    });
  }

  /** This principal's A2UI claims whose outcome was never recorded. */
  inDoubtClaims(options?: CallOptions): Promise<RouteResponse<"inDoubtClaims">> {
    return this.#call("inDoubtClaims", { ...options });
  }

  /** Issuer tokens only: a grant in the token's namespace, issued by its authority. */
  issueGrant(
    request: IssueGrantRequest,
    options?: CallOptions,
  ): Promise<RouteResponse<"issueGrant">> {
    return this.#call("issueGrant", { body: request, ...options });
  }

  /** Issuer tokens only: a narrower child of a grant in the issuer's chain, for its holder. */
  deriveGrant(
    request: DeriveGrantRequest,
    options?: CallOptions,
  ): Promise<RouteResponse<"deriveGrant">> {
    return this.#call("deriveGrant", { body: request, ...options });
  }

  /** Issuer tokens only: the namespace's grants with their usage counts. */
  listGrants(options?: CallOptions): Promise<RouteResponse<"listGrants">> {
    return this.#call("listGrants", { ...options });
  }

  /**
   * Issuer tokens only. Turns already open keep their lease; the next turn sees it.
   *
   * A grant whose ID is `.` or `..` cannot be named in a URL path: every URL parser (fetch's
   * included, and `%2e` is a dot to it too) resolves it to the parent path, so the request
   * would reach another route. It is refused here with `invalid_input` rather than answered
   * `revoked: false` for a grant that stays active.
   */
  revokeGrant(grantId: string, options?: CallOptions): Promise<RouteResponse<"revokeGrant">> {
    if (grantId === "." || grantId === "..") {
      return Promise.reject(
        new TesseraClientError(
          "invalid_input",
          `a grant ID of "${grantId}" cannot be named in a URL path (it resolves to the parent path), so the service cannot revoke it over HTTP: revoke it on the store's machine with \`tessera grants revoke --id ${grantId} --store <url> --namespace <ns>\`, which opens the store directly`,
          { field: "grantId" },
        ),
      );
    }
    return this.#call("revokeGrant", { params: { grantId }, ...options });
  }

  async #decide<N extends "authorize" | "sendMessage">(
    name: N,
    body: { readonly callId?: string | undefined },
    options: CallOptions | undefined,
  ): Promise<DecisionResponse<N>> {
    // A route's answer is its schema's output; TypeScript cannot narrow a generic route's.
    const answer = (await this.#call(name, { body, ...options })) as DecisionResponse<N>;
    if (answer.status !== "denied" || body.callId === undefined) return answer;
    return Object.assign({}, answer, { callId: body.callId });
  }

  #withCallId<T extends { callId?: string | undefined }>(request: T): T {
    // A call ID is what makes a retried send safe; without one, a retry after a dropped
    // answer would be a second decision. One is made up only when retries are on.
    if (request.callId !== undefined || this.#retry.attempts === 1) return request;
    return { ...request, callId: randomUUID() };
  }

  async #call<N extends RouteName>(name: N, input: CallInput): Promise<RouteResponse<N>> {
    const route = ROUTES[name];
    const retrySafe =
      route.method === "GET" ||
      ("retrySafe" in route &&
        route.retrySafe === true &&
        typeof (input.body as { callId?: unknown } | undefined)?.callId === "string");
    const attempts = retrySafe ? this.#retry.attempts : 1;
    // Built once, before the first attempt: what cannot be sent is refused without sending.
    const url = requestUrl(this.#base, route.path, input);
    if (!url.ok) throw url.error;
    const body = requestBody(`${route.method} ${route.path}`, input.body);
    if (!body.ok) throw body.error;
    let last: AttemptError | undefined;
    for (let attempt = 1; attempt <= attempts; attempt++) {
      if (attempt > 1) {
        await sleep(backoffMs(this.#retry, attempt - 2, last?.retryAfterMs), input.signal);
      }
      const outcome = await this.#attempt(route, url.url, body.text, input.signal, attempt);
      if (outcome.ok) return outcome.value as RouteResponse<N>;
      last = outcome.error;
      if (!outcome.retryable) break;
    }
    // attempts ≥ 1, so a loop that did not return has a last error.
    throw (last as AttemptError).withoutRetryHint();
  }

  async #attempt(
    route: (typeof ROUTES)[RouteName],
    url: string,
    body: string | undefined,
    callerSignal: AbortSignal | undefined,
    attempt: number,
  ): Promise<
    { ok: true; value: unknown } | { ok: false; retryable: boolean; error: AttemptError }
  > {
    const timeout = AbortSignal.timeout(this.#timeoutMs);
    const signal = callerSignal === undefined ? timeout : eitherSignal(callerSignal, timeout);
    const headers: Record<string, string> = { accept: "application/json" };
    if (this.#token !== undefined) headers.authorization = `Bearer ${this.#token}`;
    if (body !== undefined) headers["content-type"] = "application/json";
    let response: Response;
    let text: string | undefined;
    try {
      response = await this.#fetch(url, {
        method: route.method,
        headers,
        ...(body === undefined ? {} : { body }),
        // Never followed: fetch would send the token and the body to wherever a front points,
        // and take that host's answer as the service's decision.
        redirect: "manual",
        signal,
      });
      text = await readBoundedText(response, this.#maxResponseBytes);
    } catch (error) {
      // The caller's own abort is theirs to handle, never turned into a retry.
      if (callerSignal?.aborted) throw callerSignal.reason;
      const timedOut = timeout.aborted;
      if (!timedOut && isRefusedBeforeSending(error)) {
        return {
          ok: false,
          retryable: false,
          error: new AttemptError(
            "invalid_input",
            `${route.method} ${route.path} could not be sent: ${(error as Error).message}`,
            { attempts: attempt, cause: error },
          ),
        };
      }
      return {
        ok: false,
        retryable: true,
        error: new AttemptError(
          "service_unreachable",
          timedOut
            ? `no answer from ${route.method} ${route.path} within ${this.#timeoutMs} ms`
            : `${route.method} ${redactedUrl(url)}: ${describeNetworkError(error)}`,
          { attempts: attempt, cause: error },
        ),
      };
    }
    const requestId = response.headers.get("x-request-id") ?? undefined;
    const meta = {
      status: response.status,
      attempts: attempt,
      ...(requestId ? { requestId } : {}),
    };
    if (text === undefined) {
      // Not an answer the service gives: a stream without end (an impostor, a proxy's download)
      // would fill the host's memory. The same request would get it again: not retried.
      return {
        ok: false,
        retryable: false,
        error: new AttemptError(
          "invalid_response",
          `${route.method} ${route.path} answered ${response.status} with a body over ${this.#maxResponseBytes} bytes (maxResponseBytes), which the client does not read`,
          meta,
        ),
      };
    }
    if (isRedirect(response)) {
      // An answer the client did not expect, whatever its body says; the same request would
      // be redirected again, so it is not retried.
      return {
        ok: false,
        retryable: false,
        error: new AttemptError(
          "invalid_response",
          `${route.method} ${route.path} ${describeRedirect(response, url)}`,
          meta,
        ),
      };
    }
    const json = parseJson(text);
    if (response.ok) {
      const parsed = route.response.safeParse(json.value);
      if (json.ok && parsed.success) return { ok: true, value: parsed.data };
      return {
        ok: false,
        retryable: false,
        error: new AttemptError(
          "invalid_response",
          `${route.method} ${route.path} answered ${response.status} with a body that is not its documented shape`,
          meta,
        ),
      };
    }
    const problem = ErrorBodySchema.safeParse(json.value);
    // The first request of this call ID is still running (or its service stopped mid-call):
    // asked again later, the service answers the original once there is one.
    const retryable =
      RETRYABLE_STATUSES.has(response.status) ||
      (problem.success && problem.data.error.code === "call_in_progress");
    const error = problem.success
      ? new AttemptError(problem.data.error.code, problem.data.error.message, {
          ...meta,
          ...(problem.data.error.field === undefined ? {} : { field: problem.data.error.field }),
        })
      : new AttemptError(
          retryable ? "service_unreachable" : "invalid_response",
          `${route.method} ${route.path} answered ${response.status} without a Tessera error body`,
          meta,
        );
    error.retryAfterMs = parseRetryAfter(response.headers.get("retry-after"));
    return { ok: false, retryable, error };
  }
}

export function createTesseraClient(options: TesseraClientOptions): TesseraClient {
  return new TesseraClient(options);
}

function parseJson(text: string): { ok: boolean; value: unknown } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false, value: undefined };
  }
}
