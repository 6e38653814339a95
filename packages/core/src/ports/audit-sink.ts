import type { AuditEvent } from "../contracts/schemas.js";

/** Append-only record of every decision. */
export interface AuditSink {
  append(event: AuditEvent, options?: AppendOptions): void | Promise<void>;
}

/** How an event may be written; a sink that ignores these writes it as every other. */
export interface AppendOptions {
  /**
   * The event was answered already and changes nothing (a denial written after its reply,
   * see the kernel's `DenialRecorder`): the sink may commit it without its own flush to
   * stable storage, provided it is durable against a crash of the process at once and against
   * power loss within a bound the sink documents (SQLite: a commit without fsync, the WAL
   * synced within a second). Never set for an event written before its reply.
   */
  readonly unflushed?: boolean;
}

/**
 * Which events to read back: every given field must match; `limit` keeps the first ones, or
 * with `newest` the last ones.
 */
export interface AuditFilter {
  callId?: string;
  traceId?: string;
  /** A non-negative whole number; anything else is `invalid_input` in every sink. */
  limit?: number;
  /**
   * With `limit`, keep the newest matching events rather than the oldest, still answered oldest
   * first: what `tessera audit tail` shows, read without reading the whole trail. Changes
   * nothing without `limit`.
   */
  newest?: boolean;
}

/** How a trail is read a page at a time. */
export interface AuditPageOptions {
  /** Events per page at most: a positive whole number; default 5,000. */
  readonly pageSize?: number;
}

/** A sink that can also be read back (explain, CLI inspection). */
export interface ReadableAuditSink extends AuditSink {
  /** Events in append order, oldest first. */
  read(filter?: AuditFilter): Promise<readonly AuditEvent[]>;
  /**
   * The whole trail in append order, a page at a time, so that a reader holds one page and
   * not the trail (`tessera audit verify`). The pages together are the trail as it stood when
   * the first page was read: events appended meanwhile are not in them, and none is skipped
   * or repeated however writers interleave. A stored event that is not an event fails the
   * iteration with `UnreadableAuditEvent`, its `position` counted over the whole trail.
   * Optional for a sink written before it existed: `readAuditPages` reads such a sink whole.
   */
  readPages?(options?: AuditPageOptions): AsyncIterable<readonly AuditEvent[]>;
}
