import type { AuditEvent } from "../contracts/schemas.js";
import { checkAuditFilter } from "../contracts/store-input.js";
import type { AuditFilter, ReadableAuditSink } from "../ports/audit-sink.js";

/** Keeps every event in memory, in order. For tests, demos and `explain`. */
export class InMemoryAuditSink implements ReadableAuditSink {
  readonly #events: AuditEvent[] = [];

  /** Every event so far, oldest first (a read-only view of the live list). */
  get events(): readonly AuditEvent[] {
    return this.#events;
  }

  /**
   * Stores a frozen event: readers can never rewrite history. Events are flat, so a frozen
   * event (the kernel's are) is kept as is and any other is copied first.
   */
  append(event: AuditEvent): void {
    this.#events.push(Object.isFrozen(event) ? event : Object.freeze({ ...event }));
  }

  async read(filter: AuditFilter = {}) {
    return selectEvents(this.#events, filter);
  }

  /** Forgets everything: benchmarks use it to keep memory flat. */
  clear(): void {
    this.#events.length = 0;
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
