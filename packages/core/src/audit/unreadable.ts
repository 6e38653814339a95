import { TesseraError } from "../contracts/errors.js";
import type { AuditEvent } from "../contracts/schemas.js";
import { auditStreamOf } from "./chain.js";

/** Which of a store's indexes files an event under an ID that is not its own. */
export type AuditIndexName = "call ID" | "trace ID";

/**
 * Where a misindexed event sits, for the verdict: its stream and `seq` (as the event itself
 * says, the hashed truth) and which index disagrees with it.
 */
export interface MisindexedAt {
  readonly stream: string;
  readonly seq?: number;
  readonly index: AuditIndexName;
}

/**
 * A stored audit event that cannot be read as one: its row holds text that is not JSON, or
 * JSON that is not an object (`null`, a number), as someone with write access to the store
 * can leave it after dropping the append-only triggers. Every sink's `read` throws this
 * (`audit_unavailable`, the trail cannot be answered) naming the event's position in the read
 * order, so `tessera audit verify` reports it as the trail's break (`unreadable`) rather than
 * crashing on it.
 *
 * A store whose paged read finds an event filed under another call or trace ID than its own
 * (an index column edited beside the hashed text) throws it too, with `misindexed` set: the
 * event reads, but the store cannot answer reads by ID truthfully, and `tessera audit verify`
 * reports the break `misindexed` there. See `misindexedAuditEvent`.
 */
export class UnreadableAuditEvent extends TesseraError {
  /** Index of the unreadable event in the sink's read order (of the filtered read). */
  readonly position: number;
  /** Set when the event reads but an index of the store disagrees with it. */
  readonly misindexed?: MisindexedAt;

  constructor(
    position: number,
    what: string,
    options?: { cause?: unknown; misindexed?: MisindexedAt },
  ) {
    super(
      "audit_unavailable",
      `the stored audit event at position ${position} is ${what}`,
      options,
    );
    this.position = position;
    if (options?.misindexed !== undefined)
      this.misindexed = Object.freeze({ ...options.misindexed });
  }
}

/**
 * What a store's paged read throws for the event at `position` whose `index` (the call or
 * trace ID the store keeps beside it, to read one call without a scan) is not the event's own.
 * The index is only ever a hint: the hashed event is the truth, and the chain cannot vouch for
 * a column it does not cover, so the paged read that `tessera audit verify` walks checks it.
 */
export function misindexedAuditEvent(
  event: AuditEvent,
  position: number,
  index: AuditIndexName,
): UnreadableAuditEvent {
  return new UnreadableAuditEvent(position, `filed under a ${index} that is not its own`, {
    misindexed: {
      stream: auditStreamOf(event),
      ...(typeof event.seq === "number" ? { seq: event.seq } : {}),
      index,
    },
  });
}

/**
 * The stored form of one event (JSON text, or what a driver already parsed) as an event, or
 * `UnreadableAuditEvent`. Only the shape every reader relies on is checked (an object); the
 * event's own fields are the hash chain's to vouch for.
 */
export function parseStoredAuditEvent(stored: unknown, position: number): AuditEvent {
  let value = stored;
  if (typeof stored === "string") {
    try {
      value = JSON.parse(stored);
    } catch (error) {
      throw new UnreadableAuditEvent(position, "not JSON", { cause: error });
    }
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new UnreadableAuditEvent(position, "JSON but not an event object");
  }
  return value as AuditEvent;
}
