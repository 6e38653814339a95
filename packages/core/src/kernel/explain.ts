import { redact } from "../contracts/errors.js";
import type { AuditEvent } from "../contracts/schemas.js";
import type { AuditReason, CallerCode } from "../contracts/vocabulary.js";
import type { ReadableAuditSink } from "../ports/audit-sink.js";

/** What happened to one call, in the owner's terms. */
export type ExplainVerdict =
  | "allowed"
  | "spent"
  | "never_granted"
  | "revoked"
  | "expired"
  | "not_yet_valid"
  | "purpose_mismatch"
  | "issuer_mismatch"
  | "usage_store_unavailable"
  | "authority_unavailable"
  | "turn_closed"
  | "invalid_request"
  | "delivery_failed"
  | "refused"
  | "unknown";

export interface Explanation {
  readonly callId: string;
  readonly verdict: ExplainVerdict;
  /** The caller-facing code, which by design does not tell these verdicts apart. */
  readonly code: CallerCode | null;
  readonly reason?: AuditReason;
  readonly grantId?: string;
  readonly summary: string;
  readonly events: readonly AuditEvent[];
}

const VERDICTS: Partial<Record<AuditReason, ExplainVerdict>> = {
  allowed: "allowed",
  dispatched: "allowed",
  grant_exhausted: "spent",
  no_capability: "never_granted",
  revoked: "revoked",
  expired: "expired",
  not_yet_valid: "not_yet_valid",
  purpose_mismatch: "purpose_mismatch",
  issuer_mismatch: "issuer_mismatch",
  usage_store_unavailable: "usage_store_unavailable",
  authority_unavailable: "authority_unavailable",
  turn_closed: "turn_closed",
  invalid_request: "invalid_request",
  delivery_failed: "delivery_failed",
};

const SUMMARIES: Record<ExplainVerdict, string> = {
  allowed: "allowed by grant",
  spent: "refused: the matching grant exists but its uses are spent",
  never_granted: "refused: no grant ever covered this action on this resource",
  revoked: "refused: the matching grant was revoked by its owner",
  expired: "refused: the matching grant had expired",
  not_yet_valid: "refused: the matching grant was not yet valid",
  purpose_mismatch: "refused: the turn's purpose is not one the grant allows",
  issuer_mismatch: "refused: the grant was issued by another authority than the turn's",
  usage_store_unavailable: "refused: the grant is bounded and no usage store could count it",
  authority_unavailable: "refused: the turn could not load trustworthy grants",
  turn_closed: "refused: the turn's authority lease was already closed",
  invalid_request: "refused: the request was malformed",
  delivery_failed: "authorized and spent, but the transport failed to deliver",
  refused: "refused",
  unknown: "no decision is recorded for this call",
};

/**
 * Tells, from audit, what the caller-facing code hides: "spent" from "never granted", revoked,
 * expired and so on. The last event of the call decides (a failed delivery follows its
 * allowed decision).
 */
export async function explain(audit: ReadableAuditSink, callId: string): Promise<Explanation> {
  const events = await audit.read({ callId });
  const last = events[events.length - 1];
  if (last === undefined) {
    return Object.freeze({
      callId,
      verdict: "unknown",
      code: null,
      summary: SUMMARIES.unknown,
      events,
    });
  }
  const verdict = VERDICTS[last.reason] ?? (last.outcome === "allowed" ? "allowed" : "refused");
  const grantId = events.findLast((event) => event.grantId !== undefined)?.grantId;
  const grantPart = grantId === undefined ? "" : ` (grant ${redact(grantId)})`;
  return Object.freeze({
    callId,
    verdict,
    code: last.code,
    reason: last.reason,
    ...(grantId === undefined ? {} : { grantId }),
    summary: `${SUMMARIES[verdict]}${grantPart}`,
    events,
  });
}
