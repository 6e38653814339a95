import { randomUUID } from "node:crypto";

/**
 * W3C Trace Context (`traceparent`), read and written by the service and the MCP gateway so a
 * decision's audit event carries the host's trace ID and the calls it causes (webhooks,
 * upstream tools) continue that trace. Only version 00's shape is read; a header that does not
 * parse is ignored (the request starts a trace of its own), as the spec asks of a receiver.
 */
export interface TraceParent {
  /** 32 lowercase hex digits, never all zero. */
  readonly traceId: string;
  /** The caller's span: 16 lowercase hex digits, never all zero. */
  readonly parentId: string;
  /** Bit 0: the caller sampled this trace. */
  readonly sampled: boolean;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/** The trace a `traceparent` header names, or undefined when it is absent or malformed. */
export function parseTraceparent(
  header: string | readonly string[] | undefined,
): TraceParent | undefined {
  // Repeated headers are malformed for traceparent: start a new trace rather than guess.
  if (typeof header !== "string" || header.length > 512) return undefined;
  const match = TRACEPARENT.exec(header.trim());
  if (match === null) return undefined;
  const [, version, traceId, parentId, flags, rest] = match as unknown as [
    string,
    string,
    string,
    string,
    string,
    string | undefined,
  ];
  // Version ff is invalid; version 00 has exactly four fields; later versions may add more.
  if (version === "ff" || (version === "00" && rest !== undefined)) return undefined;
  if (/^0+$/.test(traceId) || /^0+$/.test(parentId)) return undefined;
  return Object.freeze({ traceId, parentId, sampled: (Number.parseInt(flags, 16) & 1) === 1 });
}

/** A version-00 `traceparent` header for a span of `traceId`. */
export function formatTraceparent(traceId: string, spanId: string, sampled: boolean): string {
  return `00-${traceId}-${spanId}-${sampled ? "01" : "00"}`;
}

/**
 * A fresh W3C trace ID (32 hex digits), for a request that brought none: a random UUID without
 * its dashes (122 random bits, the right-most 7 bytes all random, as Trace Context level 2
 * asks). `randomUUID` draws from a pooled buffer: about a tenth of a microsecond.
 */
export function newTraceId(): string {
  return randomUUID().replaceAll("-", "");
}
