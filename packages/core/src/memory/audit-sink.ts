import { auditStreamOf, type ChainHead, EMPTY_HEAD, linkAuditEvent } from "../audit/chain.js";
import type { AuditEvent } from "../contracts/schemas.js";
import {
  checkAuditEventIds,
  checkAuditFilter,
  checkPageSize,
  parseAuditEvent,
} from "../contracts/store-input.js";
import type { AuditFilter, AuditPageOptions, ReadableAuditSink } from "../ports/audit-sink.js";

/**
 * Keeps every event in memory, in order, linked into one hash chain per stream (see
 * `audit/chain.ts`). For tests, demos and `explain`.
 *
 * Events are linked when the trail is read (`events`, `read`), not when appended: hashing
 * costs more than a decision, and a sink cleared unread (as benchmarks clear it) would pay
 * it for nothing. One process owns the list and the order is fixed at append, so the chain
 * a reader gets is the one linking at append would have made.
 */
export class InMemoryAuditSink implements ReadableAuditSink {
  readonly #events: AuditEvent[] = [];
  readonly #heads = new Map<string, ChainHead>();
  /** Events before this index are linked. */
  #linked = 0;

  /**
   * Every event so far, oldest first, linked: a read-only view of the live list. An array
   * held across later appends shows them unlinked until `events` or `read` is called again.
   */
  get events(): readonly AuditEvent[] {
    this.#link();
    return this.#events;
  }

  /**
   * Stores a frozen event: readers can never rewrite history. A frozen event (the kernel's
   * are, built from checked parts) is kept as is until it is linked, its IDs checked; any other
   * is checked whole, as every store checks it (`invalid_input`), then copied.
   */
  append(event: AuditEvent): void {
    if (Object.isFrozen(event)) {
      checkAuditEventIds(event);
      this.#events.push(event);
    } else {
      this.#events.push(Object.freeze({ ...parseAuditEvent(event) }));
    }
  }

  async read(filter: AuditFilter = {}) {
    this.#link();
    return selectEvents(this.#events, filter);
  }

  async *readPages(options?: AuditPageOptions): AsyncGenerator<readonly AuditEvent[]> {
    const pageSize = checkPageSize(options);
    this.#link();
    // The list only grows (but for `clear`), so its length now is the trail as it stands.
    const end = this.#events.length;
    for (let from = 0; from < end; from += pageSize) {
      yield Object.freeze(this.#events.slice(from, Math.min(end, from + pageSize)));
    }
  }

  /** Forgets everything, chains included: benchmarks use it to keep memory flat. */
  clear(): void {
    this.#events.length = 0;
    this.#heads.clear();
    this.#linked = 0;
  }

  /** Links each event not yet linked after its stream's head, as a new frozen object. */
  #link(): void {
    const events = this.#events;
    for (let i = this.#linked; i < events.length; i++) {
      const event = events[i] as AuditEvent;
      const stream = auditStreamOf(event);
      const linked = linkAuditEvent(event, this.#heads.get(stream) ?? EMPTY_HEAD);
      this.#heads.set(stream, { seq: linked.seq, hash: linked.hash });
      events[i] = linked;
    }
    this.#linked = events.length;
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
  const newest = filter.newest === true && filter.limit !== undefined;
  // Newest first from the end, then turned back: a tail reads only as far back as it shows.
  for (let i = 0; i < events.length && selected.length < limit; i++) {
    const event = events[newest ? events.length - 1 - i : i] as AuditEvent;
    if (filter.callId !== undefined && event.callId !== filter.callId) continue;
    if (filter.traceId !== undefined && event.traceId !== filter.traceId) continue;
    selected.push(event);
  }
  if (newest) selected.reverse();
  return Object.freeze(selected);
}
