import { TesseraError } from "../contracts/errors.js";
import type { AuditEvent } from "../contracts/schemas.js";

/**
 * A stored audit event that cannot be read as one: its row holds text that is not JSON, or
 * JSON that is not an object (`null`, a number), as someone with write access to the store
 * can leave it after dropping the append-only triggers. Every sink's `read` throws this
 * (`audit_unavailable`, the trail cannot be answered) naming the event's position in the read
 * order, so `tessera audit verify` reports it as the trail's break (`unreadable`) rather than
 * crashing on it.
 */
export class UnreadableAuditEvent extends TesseraError {
  /** Index of the unreadable event in the sink's read order (of the filtered read). */
  readonly position: number;

  constructor(position: number, what: string, options?: { cause?: unknown }) {
    super(
      "audit_unavailable",
      `the stored audit event at position ${position} is ${what}`,
      options,
    );
    this.position = position;
  }
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
