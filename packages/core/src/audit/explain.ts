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
  | "owner_mismatch"
  | "chain_broken"
  | "usage_store_unavailable"
  | "authority_unavailable"
  | "turn_closed"
  | "invalid_request"
  | "delivery_failed"
  | "no_transport"
  | "use_returned"
  | "act_withdrawn"
  | "refused"
  | "unknown";

export interface Explanation {
  readonly callId: string;
  readonly verdict: ExplainVerdict;
  /** The caller-facing code, which by design does not tell these verdicts apart. */
  readonly code: CallerCode | null;
  readonly reason?: AuditReason;
  readonly grantId?: string;
  /** When the grant was derived: its chain of grant IDs, root first, `grantId` last. */
  readonly chain?: readonly string[];
  readonly summary: string;
  readonly events: readonly AuditEvent[];
}

/**
 * Who decided under a call ID: the kernel stamps every event with these (owner and purpose
 * left out when the turn has none). Undefined `owner` matches only events without one.
 */
export interface ExplainPrincipal {
  namespaceId: string;
  actor: string;
  authority: string;
  owner?: string;
  /**
   * The purpose the turns ran under: given (`null` for none), only events decided under
   * exactly it count, so two principals that differ only in purpose read apart. Left out,
   * purpose is not compared: an auditor naming a principal by its other parts sees them all.
   */
  purpose?: string | null;
}

/** Total, so a new audit reason fails compilation until it is given a verdict. */
const VERDICTS: Record<AuditReason, ExplainVerdict> = {
  allowed: "allowed",
  dispatched: "allowed",
  // The callback ran (its receipt says it failed): what was authorized happened.
  callback_failed: "allowed",
  grant_exhausted: "spent",
  no_capability: "never_granted",
  revoked: "revoked",
  expired: "expired",
  not_yet_valid: "not_yet_valid",
  purpose_mismatch: "purpose_mismatch",
  issuer_mismatch: "issuer_mismatch",
  owner_mismatch: "owner_mismatch",
  chain_broken: "chain_broken",
  usage_store_unavailable: "usage_store_unavailable",
  authority_unavailable: "authority_unavailable",
  turn_closed: "turn_closed",
  invalid_request: "invalid_request",
  delivery_failed: "delivery_failed",
  no_transport: "no_transport",
  use_returned: "use_returned",
  act_withdrawn: "act_withdrawn",
  // The gate's refusals: its receipt tells them apart; explain reports that nothing ran.
  invalid_message: "refused",
  unknown_catalog: "refused",
  unknown_function: "refused",
  caller_not_allowed: "refused",
  user_activation_required: "refused",
  invalid_args: "refused",
  duplicate_call: "refused",
  claim_store_unavailable: "refused",
  policy_denied: "refused",
  approval_denied: "refused",
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
  owner_mismatch:
    "refused: the request or the only covering grant is for another owner than the turn's",
  chain_broken:
    "refused: the grant was derived, and its chain no longer resolves (an ancestor missing or widened)",
  usage_store_unavailable: "refused: the grant is bounded and no usage store could count it",
  authority_unavailable: "refused: the turn could not load trustworthy grants",
  turn_closed: "refused: the turn's authority lease was already closed",
  invalid_request: "refused: the request was malformed",
  delivery_failed: "authorized and spent, but the transport failed to deliver",
  no_transport: "refused before any grant was used: no transport is configured to deliver messages",
  use_returned:
    "authorized, but the transport sent nothing (no connection, or a payload it could not serialize): the use was given back",
  act_withdrawn:
    "authorized and recorded, but withdrawn before anything ran (the store's answer was lost, or the turn closed while its act was written): the use (if any) given back; retries of this call ID are refused (authority_unavailable or turn_closed)",
  refused: "refused",
  unknown: "no decision is recorded for this call",
};

/**
 * Tells, from audit, what the caller-facing code hides: "spent" versus "never granted", revoked,
 * expired and so on. Decisions are keyed by (principal, call ID): a call ID is the caller's
 * choice, so another principal may reuse it, and its refusal must not rewrite this one's story.
 *
 * With `principal`, only that principal's events count; one that never used the ID gets the
 * same answer as an ID nobody used. Without it, the principal that first used the ID decides.
 * Among the events that count, the last decides (a failed delivery follows its allowed
 * decision), and only they are returned.
 */
export async function explain(
  audit: Pick<ReadableAuditSink, "read">,
  callId: string,
  principal?: ExplainPrincipal,
): Promise<Explanation> {
  // Only the ID's own events, whatever the sink's filter let through (a host's sink whose
  // filter matched `job_1` as a pattern told the story of `jobX1`).
  const all = (await audit.read({ callId })).filter((event) => event.callId === callId);
  const events = Object.freeze(
    principal === undefined
      ? eventsOfFirstPrincipal(all)
      : all.filter((e) => decidedBy(e, principal)),
  );
  // A duplicate's refusal says nothing of the call it repeated (one in doubt stays in doubt): the
  // story is the first call's, up to its last event of its own. Events are all returned.
  const story = events.slice(0, events.findLastIndex((e) => e.reason !== "duplicate_call") + 1);
  const told = story.length === 0 ? events : story;
  const last = told[told.length - 1];
  if (last === undefined) {
    return Object.freeze({
      callId,
      verdict: "unknown",
      code: null,
      summary: SUMMARIES.unknown,
      events,
    });
  }
  const deciding = decidingEvent(told, last);
  const verdict = VERDICTS[deciding.reason];
  const granted = told.findLast((event) => event.grantId !== undefined);
  const grantId = granted?.grantId;
  const chain = granted?.chain;
  // A derived grant is only as good as its chain, so the owner sees every link of it.
  const grantPart =
    grantId === undefined
      ? ""
      : chain === undefined
        ? ` (grant ${redact(grantId)})`
        : ` (grant ${redact(grantId)}, derived: ${chain.map(redact).join(" → ")})`;
  return Object.freeze({
    callId,
    verdict,
    code: last.code,
    reason: deciding.reason,
    ...(grantId === undefined ? {} : { grantId }),
    ...(chain === undefined ? {} : { chain: Object.freeze([...chain]) }),
    summary: `${SUMMARIES[verdict]}${grantPart}`,
    events,
  });
}

/**
 * The event whose reason explains the call: the last one, except where the gate's approval was
 * the kernel's decision (the service's A2UI routes). There the gate's `policy_denied` follows
 * the kernel's refusal of the same call, and the kernel's reason (spent, never granted, …) is
 * the one the owner needs; the caller's code stays the gate's.
 */
function decidingEvent(events: readonly AuditEvent[], last: AuditEvent): AuditEvent {
  if (last.source !== "gate" || last.reason !== "policy_denied") return last;
  const before = events[events.length - 2];
  return before?.source === "kernel" && before.outcome === "denied" ? before : last;
}

/** True when `principal` decided `event` (see `ExplainPrincipal` for how purpose counts). */
export function decidedBy(event: AuditEvent, principal: ExplainPrincipal): boolean {
  return (
    event.namespaceId === principal.namespaceId &&
    event.actor === principal.actor &&
    event.authority === principal.authority &&
    event.owner === principal.owner &&
    (principal.purpose === undefined || event.purpose === (principal.purpose ?? undefined))
  );
}

/**
 * The events of whoever used the ID first: same namespace, actor, authority and owner — and,
 * for a gate event that names none of those (a host's own gate), the same trusted session.
 * The service stamps its gate events with the principal, so they count with its kernel events.
 */
function eventsOfFirstPrincipal(events: readonly AuditEvent[]): AuditEvent[] {
  const first = events[0];
  if (first === undefined) return [];
  return events.filter(
    (e) =>
      e.namespaceId === first.namespaceId &&
      e.actor === first.actor &&
      e.authority === first.authority &&
      e.owner === first.owner &&
      (first.namespaceId !== undefined || e.session === first.session),
  );
}
