import type { ClaimKey, ClaimRecord, JsonValue, StoredClaim } from "../contracts/claims.js";
import type { AuditEvent } from "../contracts/schemas.js";
import type { GrantSource } from "./grant-source.js";

/**
 * The act ledger: one act recorded all or nothing.
 *
 * An act is one decision and what it writes: the claim of (session, call ID) when the act
 * carries one, the bounded use the decision spends, and the decision's audit event. Cut along
 * the stores (claim, then spend, then event), a fault between two writes leaves half an act: a
 * spent ticket with no event, or a claim that blocks its call ID forever. Recorded as one act
 * in one transaction, either all of it is there or none of it is, and a retry after recovery
 * gets a decision.
 *
 * Acts in flight share one durable write (one SQLite commit, one PostgreSQL statement, one
 * Redis script): the answer of each caller is read from the batch, as a ledger database
 * answers each transfer of a batch it committed once.
 */
export interface ActLedger {
  /**
   * Records `act` all or nothing, durably before it resolves. Throws `TesseraError` with a
   * `*_unavailable` code when the store cannot tell; then nothing of the act was written (a
   * store that cannot promise that, such as a composition of older ports, says so in its docs).
   */
  record(act: Act): Promise<ActResult>;
  /**
   * Withdraws an act whose `record` threw (the store's answer was lost: the write may or may not
   * have landed) and after which nothing ran. In one transaction: when the act's claim is
   * stored with exactly the act's record (same `bodyHash`, `claimedAt` and `worker`) and is
   * still unsettled, the claim is settled `failed` with `answer`, the act's spend (when it had
   * one) is given back (one use, never below zero) and `event` is appended; otherwise nothing is
   * written. So a call ID is never left blocked by an act that never ran, and a spend always
   * has its event (the allowed event, then the withdrawal's).
   *
   * Only acts with a claim can be withdrawn: without one the ledger cannot tell whether the act
   * landed (a lost reply may leave its spend and allowed event, with nothing run: a use lost,
   * never a use spent twice). Optional: a ledger without it leaves such a claim in doubt.
   * Throws like `record` when the store cannot tell; the caller tries again later.
   */
  withdraw?(withdrawal: Withdrawal): Promise<WithdrawResult>;
  /**
   * Present when `record` checks `Act.versions` inside the act's transaction: the
   * `versionSpace` of the grant source whose versions it reads. A kernel whose grant source
   * names the same space decides a warm turn on its cached grants without reading their
   * version first, and lets the record check it (one round trip per act instead of two).
   */
  readonly checksVersionsIn?: NonNullable<GrantSource["versionSpace"]>;
  /**
   * Present when an act with a spend and no `exhausted` event is recorded only if its spend
   * wins: when the use is gone, nothing of the act is written (its claim neither) and the
   * result is `spend_lost`. The kernel then knows that grant spent and decides again on the
   * next one covering the act, so acts racing for the last use of one of several grants are
   * not refused while another has uses. Without it, every spend carries its `exhausted` event.
   */
  readonly undoesLostSpends?: true;
}

/** One holder's grant version as the decision read it (see `Act.versions`). */
export interface GrantVersionCheck {
  readonly namespaceId: string;
  readonly subject: string;
  readonly version: string;
}

/** An act to withdraw (see `ActLedger.withdraw`). */
export interface Withdrawal {
  /** The act exactly as it was given to `record`; it must carry a claim. */
  readonly act: Act & { readonly claim: NonNullable<Act["claim"]> };
  /** The withdrawal's own audit event (reason `act_withdrawn`), appended when it applies. */
  readonly event: AuditEvent;
  /** What the claim answers from now on, to every retry of its call ID. */
  readonly answer: JsonValue;
}

/**
 * `withdrawn`: the act had landed and is withdrawn now (claim settled `failed`, use given back,
 * event appended). `not_recorded`: no claim under the key, so the act never landed; nothing
 * written, and a retry decides afresh. `kept`: the key holds another record, or a settled one
 * (the act landed and was answered, or was withdrawn already); nothing written.
 */
export type WithdrawResult = "withdrawn" | "not_recorded" | "kept";

/** One bounded use to spend: consumed only while fewer than `maxUses` were spent. */
export interface ActSpend {
  readonly namespaceId: string;
  readonly grantId: string;
  readonly maxUses: number;
}

export interface Act {
  /**
   * The claim of (session, call ID), when the act carries one. It is written first: when the
   * key is already claimed, nothing else of the act is written and the result carries the
   * existing claim (with its receipt and answer, when settled).
   */
  readonly claim?: { readonly key: ClaimKey; readonly record: ClaimRecord };
  /**
   * The bounded use the decision spends. One at most: a decision is made under one grant, and
   * a derived grant's uses were carved out of its parents when it was made, so using it
   * spends nothing of theirs.
   */
  readonly spend?: ActSpend;
  /** The decision's audit event: recorded when the spend wins, or when there is none. */
  readonly event: AuditEvent;
  /**
   * Recorded instead of `event` when the spend loses (another act took the last use); required
   * with `spend`, except by a ledger that `undoesLostSpends` (then an act without it whose
   * spend loses records nothing). A denial: its `outcome` is `"denied"`.
   */
  readonly exhausted?: AuditEvent;
  /**
   * The grant versions the decision was made on (its holder's, and every holder its chains
   * read), for a ledger with `checksVersionsIn`. Read in the act's transaction: when one
   * differs, nothing of the act is written and the result is `stale`, so a revocation
   * committed before the act's transaction is never missed. A ledger without the check must
   * not be given them (the kernel gives them only to one that declares it).
   */
  readonly versions?: readonly GrantVersionCheck[];
}

export type ActResult =
  | {
      readonly status: "recorded";
      /**
       * Which event was recorded: `event` (the decision stands) or `exhausted` (the spend lost,
       * nothing was spent). An act without a spend is always `event`.
       */
      readonly recorded: "event" | "exhausted";
      /** Uses of the spent grant after this act; absent without a spend. */
      readonly used?: number;
    }
  | { readonly status: "already_claimed"; readonly existing: StoredClaim }
  /** A version in `Act.versions` had changed: nothing was written; decide again. */
  | { readonly status: "stale" }
  /**
   * The spend lost and the act carried no `exhausted` event (`ActLedger.undoesLostSpends`):
   * nothing was written; the grant is spent, decide again on another. Its claim was free and
   * its versions current when the spend was tried (those answers come first).
   */
  | { readonly status: "spend_lost" };

/**
 * What a claimed act's claim reads after a record that ends in a denial (the recorded event's
 * `outcome` is `"denied"`): settled `denied` in the same write, since nothing will run, with
 * the refusal as its answer. A retry reads it back instead of deciding again.
 */
export interface DeniedAnswer {
  readonly status: "denied";
  readonly code: NonNullable<AuditEvent["code"]>;
}
