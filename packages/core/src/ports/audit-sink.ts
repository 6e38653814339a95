import type { AuditEvent } from "../contracts/schemas.js";

/** Append-only record of every decision. */
export interface AuditSink {
  append(event: AuditEvent): void | Promise<void>;
}

/** Which events to read back: every given field must match; `limit` keeps the first ones. */
export interface AuditFilter {
  callId?: string;
  traceId?: string;
  /** A non-negative whole number; anything else is `invalid_input` in every sink. */
  limit?: number;
}

/** A sink that can also be read back (explain, CLI inspection). */
export interface ReadableAuditSink extends AuditSink {
  /** Events in append order, oldest first. */
  read(filter?: AuditFilter): Promise<readonly AuditEvent[]>;
}
