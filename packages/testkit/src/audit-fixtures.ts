import { type AuditEvent, type ReadableAuditSink, verifyAuditChain } from "@tessera/core";
import { expect } from "vitest";

/** The events the audit suites append, and how their cases compare what a sink reads back. */

/** Event `index` of a test trail: allowed and denied in turn, over three traces, one call each. */
export function auditEvent(index: number, overrides: Partial<AuditEvent> = {}): AuditEvent {
  return {
    at: new Date(Date.UTC(2026, 0, 1, 0, 0, 0, index)).toISOString(),
    source: "kernel",
    outcome: index % 2 === 0 ? "allowed" : "denied",
    code: index % 2 === 0 ? null : "no_matching_grant",
    reason: index % 2 === 0 ? "allowed" : "no_capability",
    traceId: `trace-${index % 3}`,
    callId: `call-${index}`,
    actor: "agent",
    grantId: index % 2 === 0 ? `grant-${index}` : undefined,
    ...overrides,
  };
}

/** Drops keys whose value is undefined: a store may not keep "absent" and "undefined" apart. */
export function plain(events: readonly AuditEvent[]): AuditEvent[] {
  return events.map((event) => JSON.parse(JSON.stringify(event)) as AuditEvent);
}

/** What the writer gave: the event without the chain fields its sink added. */
export function content(events: readonly AuditEvent[]): AuditEvent[] {
  return plain(events).map(({ seq: _seq, prev: _prev, hash: _hash, ...rest }) => rest);
}

/** The trail verifies as one chain per stream; on failure the message names the break. */
export function expectOneChain(events: readonly AuditEvent[]): void {
  const verdict = verifyAuditChain(events);
  expect(verdict.ok ? "verified" : verdict.break).toBe("verified");
}

/** `seq` of each event of `stream`, in read order. */
export function seqsOf(
  events: readonly AuditEvent[],
  stream: string | undefined,
): (number | undefined)[] {
  return events.filter((event) => event.namespaceId === stream).map((event) => event.seq);
}

/** Every page `readPages` gives, in order. */
export async function pagesOf(
  store: ReadableAuditSink,
  pageSize?: number,
): Promise<AuditEvent[][]> {
  if (store.readPages === undefined) throw new Error("the sink has no readPages");
  const pages: AuditEvent[][] = [];
  for await (const page of store.readPages(pageSize === undefined ? {} : { pageSize })) {
    pages.push([...page]);
  }
  return pages;
}

export const upTo = (count: number) => Array.from({ length: count }, (_, i) => i + 1);
