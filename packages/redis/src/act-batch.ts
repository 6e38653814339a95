import { type Act, type ActResult, type AuditEvent, TesseraError } from "@tessera/core";
import type { ChainHead } from "@tessera/core/store-kit";
import { readStoredClaim } from "./claim-store.js";

/**
 * What the Redis act ledger (`act-ledger.ts`) keeps of each act in flight and of each batch it
 * plans, and how it answers acts it does not send: in a file of their own, so the ledger reads
 * as its batching and nothing else.
 */

const CODE = "store_unavailable";

export interface Pending {
  readonly act: Act;
  readonly event: AuditEvent;
  readonly exhausted?: AuditEvent;
  /** The claim's key and its record as stored, when the act claims. */
  readonly claimKey?: string;
  readonly claimRecord?: string;
  readonly usageKey?: string;
  /** The grant versions the act was decided on: `grants-versions` key, field, version. */
  readonly versions: readonly { key: string; field: string; version: string }[];
  readonly resolve: (result: ActResult) => void;
  readonly reject: (error: unknown) => void;
  /**
   * Acts of the same batch with the same claim key, recorded after this one: they write
   * nothing and are answered `already_claimed` with the claim this act leaves (or the one
   * that held the key before it).
   */
  followers?: Pending[];
}

/** One batch as the client decided it, before the script checks its assumptions. */
export interface Plan {
  readonly keys: string[];
  readonly args: (string | number)[];
  readonly streams: readonly { name: string; start: ChainHead; end: ChainHead }[];
  readonly counters: readonly { key: string; start: number; end: number }[];
  readonly results: readonly ActResult[];
  /** Each act's claim as the batch writes it ("" without a claim, or when it writes nothing). */
  readonly claimValues: readonly string[];
}

/**
 * A batch that could not be written fails each act with the code of the first port it
 * touches, as a composition of the ports would (the other backends' ledgers do the same):
 * `claim_store_unavailable` with a claim, `usage_store_unavailable` for a spend without one,
 * `audit_unavailable` for an event alone. Other errors stand as they are.
 */
export function asPortFailure(error: unknown, act: Act): unknown {
  if (!(error instanceof TesseraError) || error.code !== CODE) return error;
  const code =
    act.claim !== undefined
      ? "claim_store_unavailable"
      : act.spend !== undefined
        ? "usage_store_unavailable"
        : "audit_unavailable";
  return new TesseraError(code, error.message, { cause: error });
}

/** Answers acts whose claim key is held by `held` (a claim as stored): `already_claimed`. */
export function answerFollowers(acts: readonly Pending[], held: string): void {
  const existing = readStoredClaim(held);
  for (const pending of acts) {
    if (existing) pending.resolve(Object.freeze({ status: "already_claimed", existing }));
    // Who holds the key cannot be told: fail closed, never "recorded".
    else pending.reject(new TesseraError(CODE, "a stored claim is unreadable"));
  }
}
