import type { JsonValue } from "../contracts/claims.js";
import { isTesseraError } from "../contracts/errors.js";
import type { Act, ActLedger, DeniedAnswer, WithdrawResult } from "../ports/act-ledger.js";
import type { IndexedGrant } from "./grant-index.js";
import { refused } from "./lease-checks.js";
import type { ActRecord, LedgerTurn } from "./ledger-turn.js";
import { useReturned } from "./returned-uses.js";
import type { Refusal } from "./types.js";
import { markUnspent } from "./unsent.js";
import { WITHDRAWN_ANSWER } from "./withdrawals.js";

/**
 * Taking back an act the ledger recorded that will never run (`ActLedger.withdraw`): one whose
 * record's reply was lost, and one recorded while its lease closed. Sound for both for the same
 * reason: the record precedes every effect, so nothing ran. Only an act with a claim can be
 * withdrawn (the ledger tells its spend from another's by the claim).
 */

/** What the claim of an act withdrawn because its lease closed answers to every retry. */
const CLOSED_ANSWER: DeniedAnswer & JsonValue = Object.freeze({
  status: "denied",
  code: "turn_closed",
});

/** Schedules the withdrawal of `act` (with a claim only: see `ActLedger.withdraw`). */
export function withdrawLostAct(
  turn: LedgerTurn,
  act: Act,
  base: ActRecord,
  grant: IndexedGrant | undefined,
): void {
  const withdrawals = turn.parts.withdrawals;
  if (withdrawals === undefined || act.claim === undefined) return;
  const event = turn.parts.audit.build(
    Object.assign({}, base, {
      now: turn.now(),
      code: "authority_unavailable",
      reason: "act_withdrawn",
      detail: "the store's reply to the act's record was lost; nothing ran",
    } as const),
  );
  const withdrawal = {
    act: Object.assign({}, act, { claim: act.claim }),
    event,
    answer: WITHDRAWN_ANSWER,
  };
  withdrawals.schedule(withdrawal, (result) => givenBack(turn, result, act, base.action, grant));
}

/**
 * The lease closed while its act was being recorded: the act stands in the ledger (its use
 * spent, its allowed event written), nothing ran, and nothing will. Answered `turn_closed`.
 *
 * With a claim the act is withdrawn now, as one whose record's reply was lost
 * (`ActLedger.withdraw`, sound here for the same reason: nothing ran): the claim settled with
 * a `turn_closed` denial (its retries read it), the use given back, `act_withdrawn` recorded.
 * A store that cannot answer now keeps being asked in the background (`Withdrawals`).
 * Without a claim the ledger cannot withdraw (it cannot tell this act's spend from another's),
 * so the use stays spent, as in a lease without a ledger (failing closed costs a ticket,
 * never an effect), and a `turn_closed` event follows the allowed one; so does one with a
 * claim not withdrawn now.
 */
export async function withdrawClosedAct(
  turn: LedgerTurn,
  act: Act,
  base: ActRecord,
  grant: IndexedGrant,
): Promise<Refusal> {
  const withdrawals = turn.parts.withdrawals;
  const claim = act.claim;
  if (claim !== undefined && withdrawals !== undefined) {
    const event = turn.parts.audit.build(
      Object.assign({}, base, {
        now: turn.now(),
        code: "turn_closed",
        reason: "act_withdrawn",
        detail: "the lease closed while the act was recorded; nothing ran",
      } as const),
    );
    const withdrawal = { act: Object.assign({}, act, { claim }), event, answer: CLOSED_ANSWER };
    const acts = turn.parts.acts;
    let result: WithdrawResult | undefined;
    try {
      result = await (acts.withdraw as NonNullable<ActLedger["withdraw"]>).call(acts, withdrawal);
    } catch (error) {
      if (!isTesseraError(error) || error.code.endsWith("_unavailable")) {
        withdrawals.schedule(withdrawal, (later) =>
          givenBack(turn, later, act, base.action, grant),
        );
      }
    }
    if (result !== undefined) givenBack(turn, result, act, base.action, grant);
    if (result === "withdrawn") return refused("turn_closed");
  }
  const written = turn.parts.audit.write(
    Object.assign({}, base, {
      now: turn.now(),
      code: "turn_closed",
      reason: "turn_closed",
      detail: "lease closed while the act was recorded: the use is spent, nothing was done",
    } as const),
  );
  if (written !== undefined) await written;
  return refused("turn_closed");
}

/** After a withdrawal: the use is back in the store, so the marks that said spent are off. */
function givenBack(
  turn: LedgerTurn,
  result: WithdrawResult,
  act: Act,
  action: string | undefined,
  grant: IndexedGrant | undefined,
): void {
  const spend = act.spend;
  const scope = turn.scope();
  if (result !== "withdrawn" || spend === undefined || scope === undefined) return;
  // This lease's marks, and every kernel over the store in this process (their cached sets
  // holding the grant).
  markUnspent(scope, action, grant);
  if (scope.usage !== undefined) useReturned(scope.usage, spend.namespaceId, spend.grantId);
}
