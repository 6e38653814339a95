import type { AuditEvent } from "../contracts/schemas.js";
import type { AuditSink, ReadableAuditSink } from "../ports/audit-sink.js";
import { auditContentDigest } from "./chain.js";

/**
 * Whether a sink that can be read already holds `event`: a write refused because its reply
 * was lost may have landed, and writing it again would record the decision twice. For a write
 * offered again, never on the way to a reply. An event is the same when its content is (its
 * digest, chain fields aside) under the same call ID; the kernel mints a unique call ID for a
 * decision that names none. A sink that cannot be read is taken not to hold it.
 */
export async function auditHolds(sink: AuditSink, event: AuditEvent): Promise<boolean> {
  const read = (sink as Partial<ReadableAuditSink>).read;
  if (typeof read !== "function") return false;
  const digest = auditContentDigest(event);
  const stored = await read.call(sink, { callId: event.callId });
  return stored.some((candidate) => auditContentDigest(candidate) === digest);
}
