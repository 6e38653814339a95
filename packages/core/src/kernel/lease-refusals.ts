import type { AuditWriter } from "./audit-writer.js";
import type { Verdict } from "./decide.js";
import { type Precheck, refused } from "./lease-checks.js";
import type { Refusal } from "./types.js";

/**
 * How the plain lease (`Lease`) refuses a call: each refusal's event is written before the
 * caller hears it (a sink that cannot take it fails the call with `audit_unavailable`), then the
 * frozen refusal for its code. They need the audit writer alone, so they live outside the lease.
 */

/** A refusal decided before any grant was looked at (the lease's state, the request's shape). */
export async function refusePrecheck(
  audit: AuditWriter,
  now: number,
  callId: string,
  precheck: Precheck,
  action: string | undefined,
  resource: string | undefined,
): Promise<Refusal> {
  const written = audit.write({
    now,
    code: precheck.code,
    reason: precheck.reason,
    callId,
    action,
    resource,
  });
  if (written !== undefined) await written;
  return refused(precheck.code);
}

/**
 * The lease closed (a deadline, an abort) while this decision awaited the usage store, or the
 * sink taking its allowed event (which then stays, followed by this refusal's event). No
 * act happens after a lease closes, so the call is refused; the use it consumed stays spent
 * — failing closed costs a ticket, never an unauthorized effect — and audit says so.
 */
export async function refuseClosedWhileDeciding(
  audit: AuditWriter,
  now: number,
  callId: string,
  action: string,
  resource: string,
  grantId: string,
  chain: readonly string[] | undefined,
): Promise<Refusal> {
  const written = audit.write({
    now,
    code: "turn_closed",
    reason: "turn_closed",
    callId,
    action,
    resource,
    grantId,
    chain,
    detail: "lease closed while deciding: the use is spent, nothing was done",
  });
  if (written !== undefined) await written;
  return refused("turn_closed");
}

/** A refusal the grants decided (`decide`'s verdict), with the grant it names, if any. */
export async function refuseVerdict(
  audit: AuditWriter,
  now: number,
  callId: string,
  verdict: Exclude<Verdict, { allowed: true }>,
  action: string,
  resource: string,
): Promise<Refusal> {
  const written = audit.write({
    now,
    code: verdict.code,
    reason: verdict.reason,
    callId,
    action,
    resource,
    grantId: verdict.grant?.id,
    chain: verdict.grant?.chain,
    detail: verdict.detail,
  });
  if (written !== undefined) await written;
  return refused(verdict.code);
}
