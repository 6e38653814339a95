import { redact } from "../contracts/errors.js";
import { MESSAGE_SEND_ACTION } from "../contracts/messages.js";
import type { AuditWriter } from "./audit-writer.js";
import type { DecisionScope } from "./decide.js";
import type { IndexedGrant } from "./grant-index.js";
import { releaseUse } from "./returned-uses.js";

/** A failed delivery as the lease reads it. */
export interface FailedDelivery {
  readonly code: string;
  /** The transport reported that nothing left (see `DeliveryResult`). */
  readonly sent?: false;
}

/** The send a failed delivery belongs to. */
export interface FailedSend {
  readonly callId: string;
  readonly label: string;
}

/**
 * Records a failed delivery (`delivery_failed`), and when the transport reports that nothing
 * was sent, gives the bounded use it spent back and records that as its own event
 * (`use_returned`): the act provably never happened, so the ticket must not be lost. A
 * delivery that may have left keeps its use. The use is given back before its event is
 * written, so audit never claims a return that did not happen; a store that cannot give it
 * back (down, or without `release`) leaves it spent, which fails closed.
 */
export async function recordFailedDelivery(
  audit: AuditWriter,
  scope: DecisionScope | undefined,
  now: () => number,
  send: FailedSend,
  grant: IndexedGrant,
  outcome: FailedDelivery,
): Promise<void> {
  const notSent = outcome.sent === false;
  const failed = audit.write({
    now: now(),
    code: "delivery_failed",
    reason: "delivery_failed",
    callId: send.callId,
    action: MESSAGE_SEND_ACTION,
    resource: send.label,
    grantId: grant.id,
    chain: grant.chain,
    detail: `transport answered ${redact(outcome.code)}${notSent ? "; nothing was sent" : ""}`,
  });
  if (failed !== undefined) await failed;
  const usage = scope?.usage;
  if (!notSent || grant.maxUses === undefined || usage === undefined || scope === undefined) {
    return;
  }
  let released: boolean;
  try {
    released = (await releaseUse(usage, scope.namespaceId, grant.id))?.released === true;
  } catch {
    released = false;
  }
  if (!released) return;
  markUnspent(scope, MESSAGE_SEND_ACTION, grant);
  const returned = audit.write({
    now: now(),
    code: "delivery_failed",
    reason: "use_returned",
    callId: send.callId,
    action: MESSAGE_SEND_ACTION,
    resource: send.label,
    grantId: grant.id,
    chain: grant.chain,
    detail: "the transport sent nothing: one use was given back",
  });
  if (returned !== undefined) await returned;
}

/**
 * A lease's own marks once a use of `grant` came back: the grant is spendable again, and
 * discovery must look at the action's grants again instead of taking them as spent.
 */
export function markUnspent(
  scope: DecisionScope,
  action: string | undefined,
  grant: IndexedGrant | undefined,
): void {
  if (grant !== undefined) grant.spent = false;
  const entry = action === undefined ? undefined : scope.index.get(action);
  if (entry !== undefined) entry.spentBefore = 0;
}
