import type { AuditEvent, CallerCode } from "@tessera/core";
import type { Caller, PipelineParts } from "./calls.js";
import { gatewayError } from "./errors.js";
import { TOOLS_CALL } from "./tool-grants.js";

/** The parts of one call's audit event the pipeline learns as it goes. */
export interface Trail {
  readonly caller: Caller;
  readonly started: number;
  readonly argsDigest: string;
  callId: string;
  traceId: string;
  tool: string | undefined;
}

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
 * Writes the call's one event: the principal, the tool, the digest of the arguments (never the
 * arguments), the decision, the upstream outcome and the latency.
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
  try {
    await sink.append(Object.freeze(event));
  } catch {
    throw gatewayError("audit_unavailable", "the audit sink refused the call's event");
  }
}
