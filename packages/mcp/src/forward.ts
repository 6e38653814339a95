import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { type CallToolResult, ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { SpanKind } from "@opentelemetry/api";
import { UpstreamLost, UpstreamUnreached } from "./http-fetch.js";
import {
  type CallTrace,
  childSpan,
  endSpan,
  type UpstreamTrace,
  upstreamTrace,
} from "./tracing.js";
import { UpstreamTokenError } from "./upstream-auth.js";
import { CallTransport } from "./upstream-http.js";
import type { CatalogEntry } from "./upstreams.js";

/*
 * One call sent upstream, and what its ending means. A call that may have reached the
 * upstream's tool and has no answer is in doubt (it is never sent again); one the upstream
 * answered with an error, or provably never received, failed. Which is which is told by where
 * the error came from, never by its number: an upstream may send any JSON-RPC code, including
 * the -32000 and -32001 the SDK uses for its own closed connection and timeout.
 */

export type Forwarded =
  | { readonly kind: "result"; readonly result: CallToolResult }
  | {
      readonly kind: "failed";
      readonly why: string;
      /** False when nothing reached the upstream (no connection, an unknown session). */
      readonly sent: boolean;
    }
  | { readonly kind: "in_doubt"; readonly why: string };

/** The SDK's own request timeout, never reached: the call's deadline is this module's. */
const NO_SDK_TIMEOUT = 2_147_483_647;

/**
 * Sends one call upstream inside its `tessera.upstream` span. The call's trace goes with it: as
 * the `traceparent` (and `tracestate`) headers of the HTTP request, or as the same fields of
 * `params._meta` over stdio (or a host's transport). The caller's own `_meta` and token are
 * never sent.
 */
export async function forward(
  entry: CatalogEntry,
  args: Record<string, unknown>,
  timeoutMs: number,
  trace: CallTrace,
): Promise<Forwarded> {
  const span = childSpan(trace.context, "tessera.upstream", SpanKind.CLIENT, {
    "tessera.tool": entry.exposedName,
  });
  const forwarded = await send(entry, args, timeoutMs, upstreamTrace(trace, span));
  endSpan(
    span,
    forwarded.kind === "result"
      ? { outcome: "result" }
      : {
          outcome: forwarded.kind,
          code: forwarded.kind === "failed" ? "upstream_failed" : "call_in_doubt",
          failed: true,
        },
  );
  return forwarded;
}

async function send(
  entry: CatalogEntry,
  args: Record<string, unknown>,
  timeoutMs: number,
  traced: UpstreamTrace,
  again = false,
): Promise<Forwarded> {
  const upstream = entry.upstream;
  // The deadline is a signal of our own, rejecting with this very object: a -32001 the
  // upstream sends cannot pass for it. Over HTTP it also aborts the request (see upstream-http.ts).
  // It runs from before the client is had: a restarted upstream whose handshake hangs holds the
  // call no longer than one that hangs on the call itself.
  const deadline = new AbortController();
  let timedOut: McpError | undefined;
  const timer = setTimeout(() => {
    timedOut = new McpError(ErrorCode.RequestTimeout, `no answer in ${timeoutMs} ms`);
    deadline.abort(timedOut);
  }, timeoutMs);
  try {
    let client: Client;
    try {
      // A client that exited is restarted here, for this new call (never for one in doubt).
      client = await beforeDeadline(upstream.client(), deadline.signal);
    } catch (error) {
      // Nothing of the call was sent: the upstream was not ready for it within its deadline.
      if (timedOut !== undefined && error === timedOut) {
        return {
          kind: "failed",
          why: `the upstream did not start in ${timeoutMs} ms`,
          sent: false,
        };
      }
      // An upstream whose token could not be had is named with its token endpoint and cause.
      const why = error instanceof UpstreamTokenError ? error.message : "upstream not connected";
      return { kind: "failed", why, sent: false };
    }
    return await sendOn(client, entry, args, timeoutMs, traced, again, deadline, () => timedOut);
  } finally {
    clearTimeout(timer);
  }
}

/** `promise`, or the deadline's reason once it has passed (the promise goes on unheeded). */
function beforeDeadline<T>(promise: Promise<T>, deadline: AbortSignal): Promise<T> {
  if (deadline.aborted) return Promise.reject(deadline.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(deadline.reason);
    deadline.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        deadline.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        deadline.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}

/** The call on a connected client, under the call's deadline. */
async function sendOn(
  client: Client,
  entry: CatalogEntry,
  args: Record<string, unknown>,
  timeoutMs: number,
  traced: UpstreamTrace,
  again: boolean,
  deadline: AbortController,
  timedOut: () => McpError | undefined,
): Promise<Forwarded> {
  const upstream = entry.upstream;
  const transport = client.transport;
  const http = transport instanceof CallTransport;
  const request = (): Promise<CallToolResult> =>
    client.callTool(
      http
        ? { name: entry.tool, arguments: args }
        : { name: entry.tool, arguments: args, _meta: traceMeta(traced) },
      undefined,
      { signal: deadline.signal, timeout: NO_SDK_TIMEOUT },
    ) as Promise<CallToolResult>;
  try {
    const result = await upstream.run(client, () =>
      http ? transport.sendingWith(deadline.signal, request, traced) : request(),
    );
    return { kind: "result", result };
  } catch (error) {
    const expired = timedOut();
    if (expired !== undefined && error === expired)
      return { kind: "in_doubt", why: `no answer in ${timeoutMs} ms` };
    const outcome = ending(error, client, transport);
    if (outcome.retire) upstream.retire(client);
    // The client's connection went away before this request was written (its close was still
    // on its way when the call took it): nothing was sent, so a fresh client sends it, once.
    if (outcome.unsent && !again) return send(entry, args, timeoutMs, traced, true);
    return outcome.forwarded;
  }
}

function ending(
  error: unknown,
  client: Client,
  transport: unknown,
): { readonly forwarded: Forwarded; readonly retire: boolean; readonly unsent?: true } {
  const inDoubt = (why: string, retire = false) => ({
    forwarded: { kind: "in_doubt", why } as const,
    retire,
  });
  const failed = (why: string, sent: boolean, retire = false) => ({
    forwarded: { kind: "failed", why, sent } as const,
    retire,
  });
  // The SDK's own "connection closed" comes after it detached the transport (Protocol._onclose);
  // the same code from an upstream that is still connected is that upstream's answer.
  if (error instanceof McpError && error.code === ErrorCode.ConnectionClosed) {
    if (client.transport === undefined) return inDoubt("the upstream connection closed");
  }
  if (error instanceof McpError) return failed(`upstream error ${error.code}`, true);
  // No token for the upstream: the request was never sent.
  if (error instanceof UpstreamTokenError) return failed(error.message, false);
  if (error instanceof UpstreamLost) {
    return inDoubt("the connection was lost after the request was sent", true);
  }
  if (error instanceof UpstreamUnreached)
    return failed("the upstream was not reached", false, true);
  if (error instanceof StreamableHTTPError) {
    // 404 to a request carrying a session ID: the upstream no longer knows the session (it
    // restarted, say) and ran nothing; the spec's answer is a new session.
    const sessioned = (transport as CallTransport | undefined)?.sessionId !== undefined;
    if (error.code === 404 && sessioned) {
      return failed("the upstream no longer knows the session", false, true);
    }
    return failed(`upstream answered HTTP ${error.code}`, true);
  }
  // The SDK refuses a request on a client whose transport is gone before writing anything.
  if (error instanceof Error && /not connected/i.test(error.message)) {
    return { ...failed("upstream not connected", false, true), unsent: true };
  }
  return failed("malformed upstream result", true);
}

/** The trace's fields in a request's `_meta`: `tracestate` only when there is one. */
function traceMeta({ traceparent, tracestate }: UpstreamTrace): Record<string, string> {
  return tracestate === undefined ? { traceparent } : { traceparent, tracestate };
}
