import type { Act, Withdrawal } from "../ports/act-ledger.js";
import { TesseraError } from "./errors.js";
import type { AuditEvent } from "./schemas.js";
import {
  checkClaimKey,
  checkId,
  checkMaxUses,
  checkRecord,
  parseAuditEvent,
  serializeAnswer,
} from "./store-input.js";

/**
 * An act as every ledger checks it before writing anything: the claim's key and record, the
 * spend's IDs and bound, the events against the event schema, and the one rule that binds
 * them — a spend needs its `exhausted` event, which is a denial. Returns the events as parsed
 * (unknown members refused), so a store writes what was checked.
 */
export function checkAct(act: Act): { event: AuditEvent; exhausted?: AuditEvent } {
  if (typeof act !== "object" || act === null) {
    throw new TesseraError("invalid_input", "an act is { claim?, spend?, event, exhausted? }");
  }
  if (act.claim !== undefined) {
    checkClaimKey(act.claim.key);
    checkRecord(act.claim.record);
  }
  const event = parseAuditEvent(act.event);
  if (act.spend === undefined) {
    if (act.exhausted !== undefined) {
      throw new TesseraError("invalid_input", "an act's exhausted event needs a spend");
    }
    return { event };
  }
  checkId(act.spend.namespaceId, "namespaceId");
  checkId(act.spend.grantId, "grantId");
  checkMaxUses(act.spend.maxUses);
  if (act.exhausted === undefined) {
    throw new TesseraError("invalid_input", "an act with a spend needs its exhausted event");
  }
  const exhausted = parseAuditEvent(act.exhausted);
  if (exhausted.outcome !== "denied" || exhausted.code === null) {
    throw new TesseraError("invalid_input", "an act's exhausted event is a denial with a code");
  }
  return { event, exhausted };
}

/**
 * A withdrawal as every ledger checks it before writing anything: the act (which must carry a
 * claim), the withdrawal's event and the answer its claim will keep. Returns the act with its
 * claim, the event as parsed and the answer as JSON text, so a store writes what was checked.
 */
export function checkWithdrawal(withdrawal: Withdrawal): {
  act: Withdrawal["act"];
  event: AuditEvent;
  answer: string;
} {
  if (typeof withdrawal !== "object" || withdrawal === null) {
    throw new TesseraError("invalid_input", "a withdrawal is { act, event, answer }");
  }
  const { act } = withdrawal;
  checkAct(act);
  if (act.claim === undefined) {
    throw new TesseraError("invalid_input", "only an act with a claim can be withdrawn");
  }
  const event = parseAuditEvent(withdrawal.event);
  const answer = serializeAnswer(withdrawal.answer);
  if (answer === undefined) {
    throw new TesseraError("invalid_input", "a withdrawal needs the answer its claim keeps");
  }
  return { act, event, answer };
}

/**
 * The answer a claim keeps when its act was recorded as a denial (nothing will run, so the
 * claim is settled `denied` in the same write), or `undefined` when the act stands.
 */
export function deniedAnswerOf(
  recorded: AuditEvent,
): { status: "denied"; code: string } | undefined {
  if (recorded.outcome !== "denied" || recorded.code === null) return undefined;
  return { status: "denied", code: recorded.code };
}
