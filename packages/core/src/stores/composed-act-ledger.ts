import { checkAct, checkWithdrawal, deniedAnswerOf } from "../contracts/act-input.js";
import {
  type ClaimRecord,
  type ClaimStore,
  claimKeyDigest,
  type StoredClaim,
} from "../contracts/claims.js";
import type { AuditEvent } from "../contracts/schemas.js";
import type { Act, ActLedger, ActResult, Withdrawal, WithdrawResult } from "../ports/act-ledger.js";
import type { AuditSink } from "../ports/audit-sink.js";
import type { GrantUsageStore } from "../ports/usage-store.js";

/** The older ports an act can be composed from. */
export interface ComposedActPorts {
  readonly claims: ClaimStore;
  readonly usage: GrantUsageStore;
  readonly audit: AuditSink;
}

/**
 * An act ledger composed of the older ports, one write after another: claim, then spend, then
 * the event, then (for a denial) the receipt. Each step is atomic on its own and the order
 * keeps every guarantee the kernel and the gate had before the ledger (the claim comes first,
 * so no call ID is decided twice; the use is spent before the event says so).
 *
 * It is NOT one transaction: a process or store that fails between two steps leaves part of
 * the act (a claim in doubt, a spend without its event), exactly as before the ledger. The
 * stores that cannot share a transaction use it: the in-memory ports (a process that dies
 * loses them whole anyway), the claim directory and the JSON-lines audit log. SQLite,
 * PostgreSQL and Redis record an act in one transaction of their own (docs/stores.md).
 *
 * Its `withdraw` is composed the same way, and is not one transaction either: it reads the
 * claim, settles it `failed` with the answer (only an unsettled claim takes it), then gives
 * the use back (`usage.release`, when the store has it), then appends the event. Settling
 * comes first because it is the one step that decides: a second withdrawal of the same act
 * (two kernels, or one retried after a fault) finds the claim settled and is `kept`, so a use
 * is never given back twice. Withdrawals of one call ID run one after another in this process
 * (the claim store's settle does not say whether it took); across processes over a shared
 * claim store two withdrawals of one act could both read it unsettled, which only a ledger
 * with a transaction rules out. A fault after the settle leaves the use spent (a use lost,
 * never one spent twice) or the event missing. The caller's kernel forgets its spent marks on
 * `withdrawn` (this file gives the use back beside the kernel, not through it).
 */
export function composeActLedger(ports: ComposedActPorts): ActLedger {
  const withdrawing = new Map<string, Promise<WithdrawResult>>();
  return Object.freeze({
    async record(act: Act): Promise<ActResult> {
      const { event, exhausted } = checkAct(act);
      if (act.claim !== undefined) {
        const claimed = await ports.claims.claim(act.claim.key, act.claim.record);
        if (claimed.status === "already_claimed") return claimed;
      }
      let recorded = event;
      let used: number | undefined;
      if (act.spend !== undefined) {
        const spend = act.spend;
        const result = await ports.usage.tryConsume(
          spend.namespaceId,
          spend.grantId,
          spend.maxUses,
        );
        used = result.used;
        if (!result.consumed && exhausted !== undefined) recorded = exhausted;
      }
      await ports.audit.append(recorded);
      const denied = deniedAnswerOf(recorded);
      if (act.claim !== undefined && denied !== undefined) {
        await ports.claims.settle(
          act.claim.key,
          { status: "denied", settledAt: Date.parse(recorded.at) },
          denied,
        );
      }
      return Object.freeze({
        status: "recorded",
        recorded: recorded === event ? "event" : "exhausted",
        ...(used === undefined ? {} : { used }),
      });
    },

    async withdraw(withdrawal: Withdrawal): Promise<WithdrawResult> {
      const { act, event } = checkWithdrawal(withdrawal);
      const id = claimKeyDigest(act.claim.key);
      const before = withdrawing.get(id);
      const mine = (before ?? Promise.resolve<unknown>(undefined))
        .catch(() => undefined)
        .then(() => withdrawComposed(ports, withdrawal, event));
      withdrawing.set(id, mine);
      try {
        return await mine;
      } finally {
        if (withdrawing.get(id) === mine) withdrawing.delete(id);
      }
    },
  });
}

/** One withdrawal, its input checked, its call ID's other withdrawals done. */
async function withdrawComposed(
  ports: ComposedActPorts,
  withdrawal: Withdrawal,
  event: AuditEvent,
): Promise<WithdrawResult> {
  const { act, answer } = withdrawal;
  const { key, record } = act.claim;
  const stored = await ports.claims.get(key);
  if (stored === undefined) return "not_recorded";
  if (stored.receipt !== undefined || !sameRecord(stored, record)) return "kept";
  // The one deciding step: only an unsettled claim takes an outcome. Read back to tell
  // whether this settle took, or another one (a racing withdrawal, the act's own answer).
  const settledAt = Date.parse(event.at);
  await ports.claims.settle(key, { status: "failed", settledAt }, answer);
  const after = await ports.claims.get(key);
  if (after?.receipt?.status !== "failed" || after.receipt.settledAt !== settledAt) {
    return "kept";
  }
  if (act.spend !== undefined && typeof ports.usage.release === "function") {
    await ports.usage.release(act.spend.namespaceId, act.spend.grantId);
  }
  await ports.audit.append(event);
  return "withdrawn";
}

/** The claim as the act wrote it: the same body hash, instant and worker. */
function sameRecord(stored: StoredClaim, record: ClaimRecord): boolean {
  return (
    stored.bodyHash === record.bodyHash &&
    stored.claimedAt === record.claimedAt &&
    (stored.worker ?? undefined) === (record.worker ?? undefined)
  );
}
