import type { MessageEnvelope } from "../ports/transport.js";
import type { IndexedGrant } from "./grant-index.js";
import { type Outcome, outcomeOf, refused, type Send, THREW } from "./lease-checks.js";
import type { LedgerTurn } from "./ledger-turn.js";
import type { SendMessageResult } from "./types.js";
import { recordFailedDelivery } from "./unsent.js";

/**
 * Delivers a send whose act the ledger recorded (`LedgerLease`): the effect comes only after
 * that write. Plain async code: the plain lease's delivery (`Lease`) keeps its own path, which
 * awaits nothing a port answers at once.
 */
export async function deliverRecordedSend(
  turn: LedgerTurn,
  messageId: string,
  send: Send,
  grant: IndexedGrant,
): Promise<SendMessageResult> {
  const parts = turn.parts;
  const envelope: MessageEnvelope = Object.freeze({
    messageId,
    sender: parts.ctx.actor,
    recipient: send.recipient,
    payload: send.payload,
    traceId: parts.ctx.traceId,
    callId: send.callId,
    grantId: grant.id,
  });
  let outcome: Outcome;
  try {
    outcome = outcomeOf(
      await (parts.transport as NonNullable<LedgerTurn["parts"]["transport"]>).deliver(envelope),
    );
  } catch {
    outcome = THREW;
  }
  if (outcome.status === "delivered") {
    return Object.freeze(
      outcome.reply === undefined
        ? { status: "delivered", messageId: envelope.messageId, grantId: grant.id }
        : {
            status: "delivered",
            messageId: envelope.messageId,
            grantId: grant.id,
            reply: outcome.reply,
          },
    );
  }
  // The use is spent: the grant authorized an act that was attempted. The failure is its own
  // event, written before the caller hears it (it reports an effect that may have happened);
  // one the transport says never left gives its use back (unsent.ts).
  await recordFailedDelivery(parts.audit, turn.scope(), () => turn.now(), send, grant, outcome);
  return refused("delivery_failed");
}
