import type { ClaimKey, ClaimRecord, StoredClaim } from "../contracts/claims.js";
import type { AuditEvent } from "../contracts/schemas.js";

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
}

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
   * with `spend`. A denial: its `outcome` is `"denied"`.
   */
  readonly exhausted?: AuditEvent;
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
  | { readonly status: "already_claimed"; readonly existing: StoredClaim };

/**
 * What a claimed act's claim reads after a record that ends in a denial (the recorded event's
 * `outcome` is `"denied"`): settled `denied` in the same write, since nothing will run, with
 * the refusal as its answer. A retry reads it back instead of deciding again.
 */
export interface DeniedAnswer {
  readonly status: "denied";
  readonly code: NonNullable<AuditEvent["code"]>;
}
