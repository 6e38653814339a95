import { checkAct, deniedAnswerOf } from "../contracts/act-input.js";
import type { ClaimStore } from "../contracts/claims.js";
import type { Act, ActLedger, ActResult } from "../ports/act-ledger.js";
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
 */
export function composeActLedger(ports: ComposedActPorts): ActLedger {
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
  });
}
