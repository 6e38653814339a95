import type { AuditEvent } from "../contracts/schemas.js";
import type { AuditVerification } from "./verify-types.js";
import { AuditTrailWalker } from "./walk.js";

export type {
  AuditBreak,
  AuditBreakKind,
  AuditStreamReport,
  AuditVerification,
} from "./verify-types.js";
export { unreadableTrail } from "./walk.js";

/**
 * Walks the hash chain of every stream in `events`, given in the sink's read order (append
 * order), and reports each stream's first break. Pure: it reads nothing but its argument.
 * A trail too long to hold goes through `AuditTrailWalker` a page at a time instead, with
 * the same verdict.
 *
 * An edit that recomputes the edited event's own hash is consistent by itself; it shows as a
 * broken link on the NEXT event, whose `prev` still commits to the old content. That is
 * reported as `edited` at the rewritten event (the one before the broken link), unless the
 * event after the link does not link to its own successor either, in which case it is the
 * one that does not fit and is reported. An edit to a stream's last event, a deletion of its
 * last events and a rewrite of the whole stream with every hash recomputed cannot show in the
 * trail alone: a signed checkpoint kept elsewhere is what proves those.
 */
export function verifyAuditChain(events: readonly AuditEvent[]): AuditVerification {
  const walker = new AuditTrailWalker();
  walker.push(events);
  return walker.result();
}
