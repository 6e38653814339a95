import { auditStreamOf, type ChainHead, EMPTY_HEAD, linkAuditEvent } from "../audit/chain.js";
import type { AuditEvent } from "../contracts/schemas.js";
import { checkAuditFilter } from "../contracts/store-input.js";
import type { AuditFilter, ReadableAuditSink } from "../ports/audit-sink.js";

/**
 * Keeps every event in memory, in order, linked into one hash chain per stream (see
 * `audit/chain.ts`). For tests, demos and `explain`.
 */
export class InMemoryAuditSink implements ReadableAuditSink {
  readonly #events: AuditEvent[] = [];
  readonly #heads = new Map<string, ChainHead>();

  /** Every event so far, oldest first (a read-only view of the live list). */
  get events(): readonly AuditEvent[] {
    return this.#events;
  }

  /**
   * Stores the event linked after its stream's head, as a new frozen object: readers can never
   * rewrite history. One process owns the list and appends synchronously, so reading the head
   * and appending need no lock.
   */
  append(event: AuditEvent): void {
    const stream = auditStreamOf(event);
    const linked = linkAuditEvent(event, this.#heads.get(stream) ?? EMPTY_HEAD);
    this.#heads.set(stream, { seq: linked.seq, hash: linked.hash });
    this.#events.push(linked);
  }

  async read(filter: AuditFilter = {}) {
    return selectEvents(this.#events, filter);
  }

  /** Forgets everything, chains included: benchmarks use it to keep memory flat. */
  clear(): void {
    this.#events.length = 0;
    this.#heads.clear();
  }
}

/** The events a filter selects, in order; the filter is checked as every sink checks it. */
export function selectEvents(
  events: readonly AuditEvent[],
  filter: AuditFilter,
): readonly AuditEvent[] {
  checkAuditFilter(filter);
  const selected: AuditEvent[] = [];
  const limit = filter.limit ?? Number.POSITIVE_INFINITY;
  for (const event of events) {
    if (selected.length >= limit) break;
    if (filter.callId !== undefined && event.callId !== filter.callId) continue;
    if (filter.traceId !== undefined && event.traceId !== filter.traceId) continue;
    selected.push(event);
  }
  return Object.freeze(selected);
}
