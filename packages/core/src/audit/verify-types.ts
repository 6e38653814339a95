import type { ChainHead } from "./chain.js";

/**
 * How a stream's chain broke, as the first event that does not fit shows it:
 * - `edited`: an event's content no longer matches its hash, or an event was rewritten with
 *   its own hash recomputed, which its successor's `prev` still contradicts;
 * - `deleted`: events are missing before this one (a gap in `seq` that no later event fills);
 * - `inserted`: an event that does not belong: one with no chain fields after the chain
 *   began (or only some of them), or a second event at a position already taken;
 * - `reordered`: every position is present, but not in order;
 * - `unreadable`: the stored event is not an event at all (not JSON, or JSON `null`): the
 *   trail cannot be walked past it. Its stream is unknown and reported as `""`; see
 *   `unreadableTrail`.
 * - `misindexed`: the event reads, but the store files it under a call or trace ID that is
 *   not its own (an index column or list edited beside the hashed event), so a read by its
 *   own ID misses it (reads check each event's own IDs, so none shows it under another).
 *   Found by the store's paged read; the trail is not walked past it either.
 */
export type AuditBreakKind =
  | "edited"
  | "deleted"
  | "inserted"
  | "reordered"
  | "unreadable"
  | "misindexed";

/** The first break found in a stream, and where. */
export interface AuditBreak {
  readonly kind: AuditBreakKind;
  readonly stream: string;
  /** Index of the event in the list that was verified (the sink's read order). */
  readonly index: number;
  /** The event's own `seq`, when it has one. */
  readonly seq?: number;
  /** The `seq` the chain expected at this point. */
  readonly expectedSeq: number;
  /** For people: what did not match. Names positions only, never event content. */
  readonly detail: string;
}

export interface AuditStreamReport {
  readonly stream: string;
  /** Every event of the stream in the list, the unchained prefix included. */
  readonly events: number;
  /**
   * Events at the stream's start that carry no chain fields: written before the sink
   * linked events. They are reported, not treated as a break, and the chain proves nothing
   * about them.
   */
  readonly unchained: number;
  /** The last event verified in order (the one before the break, if any). */
  readonly head: ChainHead;
  readonly break?: AuditBreak;
}

export type AuditVerification =
  | {
      readonly ok: true;
      readonly events: number;
      readonly streams: readonly AuditStreamReport[];
    }
  | {
      readonly ok: false;
      readonly events: number;
      readonly streams: readonly AuditStreamReport[];
      /** The break with the lowest index over every stream. */
      readonly break: AuditBreak;
    };
