import type { ActLedger } from "../ports/act-ledger.js";
import type { DecisionRecord } from "./audit-writer.js";
import type { DecisionScope } from "./decide.js";
import type { DenialRecorder } from "./denials.js";
import type { LeaseParts } from "./lease.js";
import type { Unconfirmed } from "./trusted-turn.js";
import type { Withdrawals } from "./withdrawals.js";

/**
 * The types the act ledger's lease (`LedgerLease`) shares with the pieces it hands work to
 * (`act-withdrawal.ts`, `ledger-delivery.ts`). Types only, importing none of those files, so
 * no circle runs through here.
 */

export interface LedgerLeaseParts extends LeaseParts {
  readonly acts: ActLedger;
  readonly denials: DenialRecorder;
  /** The kernel's withdrawals of acts whose record threw (when the ledger can withdraw). */
  readonly withdrawals?: Withdrawals;
  /** Set when the turn's grants were taken on trust (see `Unconfirmed`). */
  readonly unconfirmed?: Unconfirmed;
}

/**
 * A ledger lease as its pieces see it while they run. `now` and `scope` are read when needed,
 * not copied: the turn's grants are replaced once when grants taken on trust proved stale, and
 * what a withdrawal gives back after that belongs to the grants the turn stands on then.
 */
export interface LedgerTurn {
  readonly parts: LedgerLeaseParts;
  /**
   * The lease's instant (the turn's `now` when it fixed one); throws `authority_unavailable`
   * when the clock gives none.
   */
  now(): number;
  /** The turn's indexed grants as they stand now (undefined: the turn has none). */
  scope(): DecisionScope | undefined;
}

/** What a decision's event says of it, without its outcome: the withdrawal's event repeats it. */
export type ActRecord = Omit<DecisionRecord, "code" | "reason" | "detail">;
