import type { AuditEvent, CallerCode } from "@tessera/core";
import { gatewayError } from "./errors.js";
import type { PipelineParts, Trail } from "./pipeline.js";
import { TOOLS_CALL } from "./tool-grants.js";
import { childSpan, endSpan } from "./tracing.js";

/** An event the gateway decides itself (before or beside the kernel). */
export function gateEvent(code: CallerCode | null, reason: AuditEvent["reason"]): AuditEvent {
  return {
    at: "",
    source: "gate",
    outcome:
      code === null && reason !== "duplicate_call" && reason !== "claim_store_unavailable"
        ? "allowed"
        : "denied",
    code,
    reason,
    traceId: "",
    callId: "",
  };
}

/**
 * Writes one event of the call: the principal, the tool, the digest of the arguments (never the
 * arguments), the decision or the upstream's outcome, and the latency.
 */
export async function audit(
  parts: PipelineParts,
  trail: Trail,
  base: AuditEvent | undefined,
  notes: readonly string[],
  receipt?: string,
  latency?: number,
): Promise<void> {
  const sink = parts.audit;
  if (sink === undefined) return;
  const event = stamp(parts, trail, base, notes, receipt, latency);
  const write = childSpan(trail.caller.trace.context, "tessera.store.write");
  try {
    await sink.append(event);
  } catch {
    endSpan(write, { outcome: "error", code: "audit_unavailable", failed: true });
    throw gatewayError("audit_unavailable", "the audit sink refused the call's event");
  }
  endSpan(write, { outcome: "appended" });
}

/**
 * `audit` for a call that has already failed for another reason (the store refused its act):
 * that failure is the caller's answer, so an event the sink refuses too is reported to the
 * host's observer, never thrown in its place.
 */
export async function auditBestEffort(
  parts: PipelineParts,
  trail: Trail,
  base: AuditEvent,
  notes: readonly string[],
): Promise<void> {
  try {
    await audit(parts, trail, base, notes);
  } catch {
    parts.onStoreFailure({
      write: "audit_event",
      callId: trail.callId,
      code: "audit_unavailable",
      detail: `the event of a call that failed ${base.reason} was not written`,
    });
  }
}

/**
 * The call's event, not written: `base` (the kernel's decision, or the gateway's own) with the
 * call's principal, session, tool, argument digest, notes and latency. An act's event is
 * stamped this way before the act ledger records it.
 */
export function stamp(
  parts: PipelineParts,
  trail: Trail,
  base: AuditEvent | undefined,
  notes: readonly string[],
  receipt?: string,
  latency?: number,
): AuditEvent {
  const { principal, session } = trail.caller;
  const ms = latency ?? Math.round(performance.now() - trail.started);
  const event: AuditEvent = {
    ...(base ?? gateEvent(null, "allowed")),
    at: new Date(parts.clock.now()).toISOString(),
    traceId: trail.traceId,
    callId: trail.callId,
    namespaceId: principal.namespaceId,
    actor: principal.actor,
    authority: principal.authority,
    action: TOOLS_CALL,
    detail: [
      ...(trail.tool === undefined ? [] : [`tool ${trail.tool}`]),
      `args sha256:${trail.argsDigest}`,
      ...notes,
      `latency ${ms} ms`,
    ].join("; "),
  };
  if (principal.owner !== undefined) event.owner = principal.owner;
  if (principal.purpose !== undefined) event.purpose = principal.purpose;
  if (session !== undefined) event.session = session;
  if (receipt !== undefined) event.receipt = receipt;
  return Object.freeze(event);
}
