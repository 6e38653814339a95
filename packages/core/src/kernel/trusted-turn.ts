import { TesseraError } from "../contracts/errors.js";
import type { GrantVersionCheck } from "../ports/act-ledger.js";
import type { DecisionScope } from "./decide.js";

/**
 * A turn whose grants were taken from the kernel's cache on trust, their version unread
 * (open-index.ts, `trustedView`): the versions they were built at, for the ledger to check with
 * the first act that stands on them, and how to open the turn's grants the ordinary way
 * (versions read) when one moved or a refusal needs them confirmed.
 */
export interface Unconfirmed {
  readonly versions: readonly GrantVersionCheck[];
  readonly reopen: () => Promise<DecisionScope | undefined>;
}

/** A decision made on grants that proved stale: the turn's grants were read again; decide anew. */
export const STALE: unique symbol = Symbol("stale");

/**
 * Runs a decision, and once more when it was made on grants taken on trust that proved stale:
 * the first attempt confirmed them, so the second carries no versions and cannot be stale.
 */
export async function decideAgainIfStale<T>(once: () => Promise<T | typeof STALE>): Promise<T> {
  const first = await once();
  if (first !== STALE) return first;
  const second = await once();
  if (second !== STALE) return second;
  throw new TesseraError("store_unavailable", "a decision was stale after its grants were read");
}
