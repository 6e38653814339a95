import type { GrantReason } from "../contracts/vocabulary.js";
import type { GrantUsageStore } from "../ports/usage-store.js";
import { type ActionIndex, type IndexedGrant, strongerReason } from "./grant-index.js";

/**
 * Discovery: when no grant covers an act, whether its action is still visible to the actor
 * (a live unbounded grant, or a live bounded one not spent) decides which refusal the caller
 * hears (see `decide.ts`). Reads usage, never writes it.
 */

/** Why a grant cannot be used at `now` because of its window, or undefined inside it. */
export function windowReason(grant: IndexedGrant, now: number): GrantReason | undefined {
  const window = grant.window;
  if (now < window.notBefore) return "not_yet_valid";
  if (now >= window.expiresAt) return "expired";
  return undefined;
}

/** What discovery found: the action visible, the usage store down, or why it is hidden. */
export type Visibility = "visible" | "store_down" | GrantReason;

/** The part of a decision's scope discovery reads (a `DecisionScope` is one). */
export interface DiscoveryScope {
  readonly usage: GrantUsageStore | undefined;
  readonly namespaceId: string;
}

/**
 * Is the action discoverable now? It is when a live unbounded grant exists, or a live bounded
 * one the usage store reports unspent. Reads usage, never consumes. When hidden, says why.
 * Synchronous unless it has to ask the usage store.
 */
export function discover(
  scope: DiscoveryScope,
  entry: ActionIndex,
  now: number,
): Visibility | Promise<Visibility> {
  let hidden: GrantReason | undefined = entry.fixedReason;
  for (const grant of entry.unbounded) {
    const outside = windowReason(grant, now);
    if (outside === undefined) return "visible";
    hidden = strongerReason(hidden, outside);
  }
  if (entry.bounded.length === 0) return hidden ?? "no_capability";
  return discoverBounded(scope, entry, now, hidden);
}

async function discoverBounded(
  scope: DiscoveryScope,
  entry: ActionIndex,
  now: number,
  hiddenSoFar: GrantReason | undefined,
): Promise<Visibility> {
  let hidden = hiddenSoFar;
  const bounded = entry.bounded;
  // Grants before the cursor are known spent, and a spent grant stays spent: never look at
  // them again. Each grant is passed once per lease, so discovery costs O(1) amortized even
  // after thousands of tickets are spent.
  while (entry.spentBefore < bounded.length && (bounded[entry.spentBefore] as IndexedGrant).spent) {
    entry.spentBefore++;
  }
  if (entry.spentBefore > 0) hidden = strongerReason(hidden, "grant_exhausted");
  for (let position = entry.spentBefore; position < bounded.length; position++) {
    const grant = bounded[position] as IndexedGrant;
    if (grant.spent) {
      hidden = strongerReason(hidden, "grant_exhausted");
      continue;
    }
    const outside = windowReason(grant, now);
    if (outside !== undefined) {
      hidden = strongerReason(hidden, outside);
      continue;
    }
    if (scope.usage === undefined) return strongerReason(hidden, "usage_store_unavailable");
    let used: number;
    try {
      used = await scope.usage.getUsage(scope.namespaceId, grant.id);
    } catch {
      return "store_down";
    }
    if (used < (grant.maxUses as number)) return "visible";
    grant.spent = true;
    hidden = strongerReason(hidden, "grant_exhausted");
  }
  return hidden ?? "no_capability";
}
