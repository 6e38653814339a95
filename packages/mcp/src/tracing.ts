import { type CallToolResult, McpError } from "@modelcontextprotocol/sdk/types.js";
import {
  type Attributes,
  type Context,
  createTraceState,
  isSpanContextValid,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  trace,
} from "@opentelemetry/api";
import {
  formatTraceparent,
  newTraceId,
  parseTraceparent,
  parseTracestate,
  type TraceParent,
} from "@tessera/core/http";
import { CODE_KEY } from "./keys.js";

/*
 * The gateway's spans, through `@opentelemetry/api` only: without an SDK installed by the host
 * every span is the API's no-op, and the trace ID still flows (into the audit event and to the
 * upstream) from the caller's `traceparent` or a fresh one. No context manager is assumed:
 * parents are passed explicitly. Attributes name the tool, the outcome and the code, never the
 * arguments, the results or any token.
 */

const TRACER = "@tessera/mcp";

/** One `tools/call`'s trace: the ID its audit events carry, and its server span. */
export interface CallTrace {
  /** 32 hex digits: the caller's trace, else the span's (an SDK's), else a fresh one. */
  readonly traceId: string;
  /** The caller's sampled flag, when it sent a `traceparent` (used when no SDK records). */
  readonly sampled: boolean;
  /** Whether the trace is the caller's own (it sent a `traceparent`). */
  readonly fromCaller: boolean;
  /** The caller's `tracestate`, passed on unchanged with its trace. */
  readonly tracestate: string | undefined;
  readonly span: Span;
  /** The context whose active span is `span`: the parent of the call's child spans. */
  readonly context: Context;
}

/** What a span came to: `tessera.outcome` and (for a refusal or an error) `tessera.code`. */
export interface Ending {
  readonly outcome: string;
  readonly code?: string | null;
  /** A failure of the step itself (not a refusal): the span's status is ERROR. */
  readonly failed?: boolean;
}

/** The caller's trace, and the vendors' `tracestate` that came in the same carrier. */
export interface IncomingTrace extends TraceParent {
  readonly tracestate: string | undefined;
}

/**
 * The caller's trace: `params._meta.traceparent` (per request, any transport) when it parses,
 * else the HTTP request's `traceparent` header; each with the `tracestate` beside it in the
 * same place. Anything malformed is ignored.
 */
export function incomingTrace(meta: unknown, headers: unknown): IncomingTrace | undefined {
  return traceIn(meta) ?? traceIn(headers);
}

function traceIn(carrier: unknown): IncomingTrace | undefined {
  if (typeof carrier !== "object" || carrier === null) return undefined;
  const fields = carrier as Record<string, unknown>;
  const parent = parseTraceparent(asHeader(fields.traceparent));
  if (parent === undefined) return undefined;
  return { ...parent, tracestate: parseTracestate(asHeader(fields.tracestate)) };
}

/** A `_meta` field may hold any JSON: only a string is a header value. */
function asHeader(value: unknown): string | undefined {
  return typeof value === "string" ? value : undefined;
}

/** Starts the call's SERVER span under the caller's trace (when it sent one). */
export function startCall(
  incoming: IncomingTrace | undefined,
  tool: string | undefined,
): CallTrace {
  const tracestate = incoming?.tracestate;
  const parent =
    incoming === undefined
      ? ROOT_CONTEXT
      : trace.setSpanContext(ROOT_CONTEXT, {
          traceId: incoming.traceId,
          spanId: incoming.parentId,
          traceFlags: incoming.sampled ? TraceFlags.SAMPLED : TraceFlags.NONE,
          isRemote: true,
          ...(tracestate === undefined ? {} : { traceState: createTraceState(tracestate) }),
        });
  const span = trace
    .getTracer(TRACER)
    .startSpan(
      "tessera.mcp.tools_call",
      { kind: SpanKind.SERVER, attributes: tool === undefined ? {} : { "tessera.tool": tool } },
      parent,
    );
  const own = span.spanContext();
  const traceId = incoming?.traceId ?? (isSpanContextValid(own) ? own.traceId : newTraceId());
  return {
    traceId,
    sampled: incoming?.sampled ?? false,
    fromCaller: incoming !== undefined,
    tracestate,
    span,
    context: trace.setSpan(parent, span),
  };
}

/**
 * Ends the call's span with what the caller got: a refusal is a result carrying its code (see
 * replies.ts), any other result was forwarded (`allowed`); an error carries its code in `data`.
 */
export function endCall(
  call: CallTrace,
  answer: { readonly result: CallToolResult } | { readonly error: unknown },
): void {
  if ("result" in answer) {
    const code = codeIn(answer.result._meta, CODE_KEY);
    endSpan(
      call.span,
      answer.result.isError === true && code !== null
        ? { outcome: "denied", code }
        : { outcome: "allowed" },
    );
    return;
  }
  const code = answer.error instanceof McpError ? codeIn(answer.error.data, "code") : "internal";
  endSpan(call.span, { outcome: "error", code, failed: true });
}

function codeIn(data: unknown, key: string): string | null {
  const code =
    typeof data === "object" && data !== null ? (data as Record<string, unknown>)[key] : null;
  return typeof code === "string" ? code : null;
}

/** A child span of `parent` (a call's context, or a child's). */
export function childSpan(
  parent: Context,
  name: string,
  kind: SpanKind = SpanKind.INTERNAL,
  attributes: Attributes = {},
): Span {
  return trace.getTracer(TRACER).startSpan(name, { kind, attributes }, parent);
}

/** The context whose active span is `span`, for its own children. */
export function under(parent: Context, span: Span): Context {
  return trace.setSpan(parent, span);
}

/** Ends `span` with its outcome and code as attributes (never a payload). */
export function endSpan(span: Span, ending: Ending): void {
  span.setAttribute("tessera.outcome", ending.outcome);
  if (ending.code != null) span.setAttribute("tessera.code", ending.code);
  if (ending.failed === true) {
    span.setStatus({ code: SpanStatusCode.ERROR, message: ending.code ?? ending.outcome });
  }
  span.end();
}

/** The trace context sent upstream with a call. */
export interface UpstreamTrace {
  readonly traceparent: string;
  /** The caller's vendors' state, as it came (or as the SDK's span holds it). */
  readonly tracestate: string | undefined;
}

/**
 * The trace sent upstream: the call's trace ID, with the upstream span as the parent when an
 * SDK made one (else a fresh span ID: this hop is then invisible, the trace is not), and the
 * caller's `tracestate`.
 */
export function upstreamTrace(call: CallTrace, span: Span): UpstreamTrace {
  const context = span.spanContext();
  // Without an SDK the no-op span carries its parent's context (the caller's span, remote).
  if (
    isSpanContextValid(context) &&
    context.isRemote !== true &&
    context.traceId === call.traceId
  ) {
    const state = context.traceState?.serialize();
    return {
      traceparent: formatTraceparent(
        call.traceId,
        context.spanId,
        (context.traceFlags & TraceFlags.SAMPLED) === TraceFlags.SAMPLED,
      ),
      tracestate: state === undefined || state === "" ? call.tracestate : state,
    };
  }
  return {
    traceparent: formatTraceparent(call.traceId, spanId(), call.sampled),
    tracestate: call.tracestate,
  };
}

/**
 * A span ID: unique, not secret (the OpenTelemetry SDK makes them from Math.random too).
 * `randomBytes` cost more than the whole rest of a call's tracing.
 */
function spanId(): string {
  const high = Math.floor(Math.random() * 0x1_0000_0000);
  const low = Math.floor(Math.random() * 0x1_0000_0000) || 1;
  return high.toString(16).padStart(8, "0") + low.toString(16).padStart(8, "0");
}
