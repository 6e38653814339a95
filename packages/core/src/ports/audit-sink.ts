import type { AuditEvent } from "../contracts/schemas.js";

/** Append-only record of every decision. */
export interface AuditSink {
  append(event: AuditEvent): void | Promise<void>;
}

/** A sink that can also be read back (explain, CLI inspection). */
export interface ReadableAuditSink extends AuditSink {
  read(filter?: {
    callId?: string;
    traceId?: string;
    limit?: number;
  }): Promise<readonly AuditEvent[]>;
}
