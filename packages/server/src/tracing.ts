import { randomFillSync } from "node:crypto";
import {
  type Context,
  createTraceState,
  INVALID_TRACEID,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  type SpanOptions,
  SpanStatusCode,
  TraceFlags,
  type TraceState,
  trace,
} from "@opentelemetry/api";
import type { ActLedger, AuditEvent, MessageEnvelope } from "@tessera/core";
import { isTesseraError } from "@tessera/core";
import {
  formatTraceparent,
  newTraceId,
  parseTraceparent,
  parseTracestate,
} from "@tessera/core/http";
import { wrapActLedger } from "@tessera/core/store-kit";

/**
 * Traces through `@opentelemetry/api` only: the service never installs an SDK. Without one
 * the API's tracer is a no-op, and this file costs a request one non-recording span (the API's
 * own object) and nothing else: child spans, attributes and contexts are made only while the
 * request's span records. A host that installs an SDK (a `TracerProvider` registered globally)
 * gets a server span per decision request, parented on the caller's `traceparent`, with child
 * spans for the decision, the act ledger's write and the webhook delivery. No context manager
 * is assumed: parents are passed explicitly, found from the act's or the envelope's trace ID.
 */
const tracer = trace.getTracer("@tessera/server");

// One options object per kind, shared: a span started costs no options allocation of ours.
const SERVER: SpanOptions = Object.freeze({ kind: SpanKind.SERVER });
const CLIENT: SpanOptions = Object.freeze({ kind: SpanKind.CLIENT });
const INTERNAL: SpanOptions = Object.freeze({ kind: SpanKind.INTERNAL });

/** The decision routes, and their span names (constants: no name is built per request). */
const SPAN_NAMES = {
  send: "tessera.send",
  authorize: "tessera.authorize",
  "a2ui.claim": "tessera.a2ui.claim",
  "a2ui.call": "tessera.a2ui.call",
} as const;
export type TracedRoute = keyof typeof SPAN_NAMES;

/** What a request's span says of how it ended: never a payload, a body or a token. */
export interface RequestOutcome {
  /** `allowed`, `denied`, `delivered`, `replayed`, `refused`, `dispatch`, `error`... */
  readonly outcome: string;
  /** The refusal's or the error's code. */
  readonly code?: string | null | undefined;
  readonly status: number;
}

/** A request's headers, as Node hands them over: `traceparent` and `tracestate` are read. */
export type TraceHeaders = Readonly<Record<string, string | readonly string[] | undefined>>;

/**
 * One decision request's trace: its trace ID (the caller's, from a valid `traceparent`; else
 * the SDK's new trace; else a fresh one), its server span, and the parent its child spans take
 * (the request's span, or the decision's while it runs).
 */
export class RequestTrace {
  readonly traceId: string;
  /** The trace ID is the caller's or the SDK's, not one minted for this request alone. */
  readonly joined: boolean;
  readonly #span: Span;
  /** Whether the span records: false without an SDK (or when the SDK dropped the trace). */
  readonly recording: boolean;
  /** The caller's context (its remote span, or none): the parent of outgoing calls when not recording. */
  readonly #remote: Context;
  /** Parent of the next child span; undefined while not recording. */
  #current: Context | undefined;

  /** The request's trace headers: `traceparent`, and `tracestate`, passed on with it. */
  constructor(route: TracedRoute, headers: TraceHeaders) {
    const caller = parseTraceparent(headers.traceparent);
    // The vendors' state rides with the caller's trace only (a broken traceparent drops it).
    const state = caller === undefined ? undefined : parseTracestate(headers.tracestate);
    const traceState = state === undefined ? undefined : createTraceState(state);
    this.#remote =
      caller === undefined
        ? ROOT_CONTEXT
        : trace.setSpanContext(ROOT_CONTEXT, {
            traceId: caller.traceId,
            spanId: caller.parentId,
            traceFlags: caller.sampled ? TraceFlags.SAMPLED : TraceFlags.NONE,
            isRemote: true,
            ...(traceState === undefined ? {} : { traceState }),
          });
    this.#span = tracer.startSpan(SPAN_NAMES[route], SERVER, this.#remote);
    this.recording = this.#span.isRecording();
    const own = this.#span.spanContext();
    // The SDK's trace ID when it started one (no caller): the audit event joins its spans.
    // (An SDK's IDs are valid or the invalid constant: one comparison, not the API's regexes.)
    const joined = caller?.traceId ?? (own.traceId === INVALID_TRACEID ? undefined : own.traceId);
    this.joined = joined !== undefined;
    // Time-ordered (core's `newTraceId`): stores index events by trace ID.
    this.traceId = joined ?? newTraceId();
    if (this.recording) {
      this.#span.setAttribute("tessera.route", route);
      this.#current = trace.setSpan(this.#remote, this.#span);
    }
  }

  /**
   * Runs the kernel's decision inside a `tessera.decide` span (only while recording); `answer`
   * reads the outcome off its result.
   */
  async decide<T>(
    callId: string | undefined,
    run: () => Promise<T>,
    answer: (result: T) => { readonly status: string; readonly code?: string },
  ): Promise<T> {
    const parent = this.#current;
    if (parent === undefined) return run();
    const span = tracer.startSpan("tessera.decide", INTERNAL, parent);
    if (callId !== undefined) span.setAttribute("tessera.call_id", callId);
    this.#current = trace.setSpan(parent, span);
    try {
      const result = await run();
      const { status, code } = answer(result);
      span.setAttribute("tessera.outcome", status);
      if (code !== undefined) span.setAttribute("tessera.code", code);
      return result;
    } catch (error) {
      failed(span, error);
      throw error;
    } finally {
      span.end();
      this.#current = parent;
    }
  }

  /** A child span of the request (of its decision while one runs); undefined when not recording. */
  child(name: string, kind: "client" | "internal"): Span | undefined {
    const parent = this.#current;
    return parent === undefined
      ? undefined
      : tracer.startSpan(name, kind === "client" ? CLIENT : INTERNAL, parent);
  }

  /** The parent of an outgoing call: the current span while recording, else the caller's. */
  outgoing(): Context {
    return this.#current ?? this.#remote;
  }

  end(callId: string | undefined, ended: RequestOutcome): void {
    const span = this.#span;
    if (this.recording) {
      span.setAttribute("tessera.outcome", ended.outcome);
      if (typeof ended.code === "string") span.setAttribute("tessera.code", ended.code);
      if (callId !== undefined) span.setAttribute("tessera.call_id", callId);
      span.setAttribute("http.response.status_code", ended.status);
      if (ended.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
    }
    span.end();
  }
}

/** How a request that threw ended: its HTTP status as the error handler answers it. */
export function errorOutcome(error: unknown): RequestOutcome {
  const known = error as { status?: unknown; code?: unknown };
  if (typeof known.status === "number" && typeof known.code === "string") {
    return { outcome: "error", code: known.code, status: known.status };
  }
  if (isTesseraError(error) && error.code.endsWith("_unavailable")) {
    return { outcome: "error", code: "unavailable", status: 503 };
  }
  return { outcome: "error", code: "internal_error", status: 500 };
}

function failed(span: Span, error: unknown): void {
  span.setAttribute("tessera.outcome", "error");
  // The code only: an error's message may quote a store's words, never meant for a trace.
  if (isTesseraError(error)) span.setAttribute("tessera.code", error.code);
  span.setStatus({ code: SpanStatusCode.ERROR });
}

/**
 * The act ledger with a `tessera.store.write` span around each record whose request is traced
 * (found by the act's event). `withdraw` passes through untouched.
 */
export function tracedActs(
  inner: ActLedger,
  traceOf: (event: AuditEvent) => RequestTrace | undefined,
): ActLedger {
  const record: ActLedger["record"] = (act) => {
    const span = traceOf(act.event)?.child("tessera.store.write", "internal");
    if (span === undefined) return inner.record(act);
    return inner.record(act).then(
      (result) => {
        // As the gateway says it: recorded, already_claimed; and exhausted (the spend lost).
        span.setAttribute(
          "tessera.outcome",
          result.status === "recorded" && result.recorded === "exhausted"
            ? "exhausted"
            : result.status,
        );
        span.end();
        return result;
      },
      (error: unknown) => {
        failed(span, error);
        span.end();
        throw error;
      },
    );
  };
  return wrapActLedger(inner, record);
}

/**
 * The parent context of each delivery in flight, by envelope (the object the kernel hands the
 * transport): set by the service before it calls the transport, read by the webhook transport
 * to parent its span and write its `traceparent`. Weak: a delivery's entry goes with it.
 */
const deliveries = new WeakMap<MessageEnvelope, Context>();

export function setDeliveryContext(envelope: MessageEnvelope, parent: Context): void {
  deliveries.set(envelope, parent);
}

/** A delivery's client span and `traceparent` (see `clientSpan`), its parent set by the service. */
export function deliverySpan(name: string, envelope: MessageEnvelope): ClientSpan {
  return clientSpan(name, envelope.traceId, deliveries.get(envelope));
}

export interface ClientSpan {
  readonly span: Span | undefined;
  readonly traceparent: string | undefined;
  /** The caller's `tracestate` (as the SDK's span holds it, when one records), passed on. */
  readonly tracestate: string | undefined;
}

/**
 * An outgoing call's client span (only when its parent records) and the `traceparent` to send
 * with it: `traceId` (the decision's, as audit has it), the span's ID as parent (a fresh ID
 * when nothing records), and the sampled flag the trace carries. No header when `traceId` is
 * not a W3C one (a host's own kernel may use any string).
 */
export function clientSpan(name: string, traceId: string, parent: Context | undefined): ClientSpan {
  const parentSpan = parent === undefined ? undefined : trace.getSpan(parent);
  const span = parentSpan?.isRecording() ? tracer.startSpan(name, CLIENT, parent) : undefined;
  const known = span?.spanContext() ?? parentSpan?.spanContext();
  const sampled =
    known !== undefined &&
    known.traceId === traceId &&
    (known.traceFlags & TraceFlags.SAMPLED) !== 0;
  const tracestate = known?.traceId === traceId ? stateText(known.traceState) : undefined;
  if (span !== undefined && known?.traceId === traceId) {
    return { span, traceparent: formatTraceparent(traceId, known.spanId, sampled), tracestate };
  }
  if (!/^[0-9a-f]{32}$/.test(traceId) || /^0+$/.test(traceId)) {
    return { span, traceparent: undefined, tracestate: undefined };
  }
  return { span, traceparent: formatTraceparent(traceId, freshSpanId(), sampled), tracestate };
}

/** The trace headers of an outgoing request: `tracestate` only beside its `traceparent`. */
export function traceHeaders(
  traceparent: string,
  tracestate: string | undefined,
): Record<string, string> {
  return tracestate === undefined ? { traceparent } : { traceparent, tracestate };
}

/** Ends an outgoing call's client span with its outcome and code. */
export function endClientSpan(
  span: Span | undefined,
  result: { readonly status: string; readonly code?: string },
): void {
  if (span === undefined) return;
  span.setAttribute("tessera.outcome", result.status);
  if (result.code !== undefined) {
    span.setAttribute("tessera.code", result.code);
    span.setStatus({ code: SpanStatusCode.ERROR });
  }
  span.end();
}

/**
 * Random bytes drawn from a pool refilled 4 KiB at a time, as hex: a span ID costs about what
 * a `randomUUID` does, on every request that brings no `traceparent`.
 */
const pool = Buffer.allocUnsafe(4096);
let drawn = pool.length;

function randomHex(bytes: number): string {
  for (;;) {
    if (drawn + bytes > pool.length) {
      randomFillSync(pool);
      drawn = 0;
    }
    const start = drawn;
    drawn += bytes;
    const hex = pool.toString("hex", start, drawn);
    // All zeros is the invalid ID (one chance in 2^64 or more): draw again.
    if (!/^0+$/.test(hex)) return hex;
  }
}

/** A W3C span ID: 16 random hex digits. */
function freshSpanId(): string {
  return randomHex(8);
}

/** A span context's trace state as a header value; none when empty. */
function stateText(state: TraceState | undefined): string | undefined {
  const text = state?.serialize();
  return text === "" ? undefined : text;
}
