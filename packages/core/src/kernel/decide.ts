import type { AuditReason, CallerCode } from "../contracts/vocabulary.js";
import type { GrantUsageStore } from "../ports/usage-store.js";
import {
  type ActionIndex,
  coveringBuckets,
  type GrantIndex,
  type IndexedGrant,
  strongerReason,
} from "./grant-index.js";
import type { ResourceRef } from "./types.js";

/**
 * The decision itself, deny by default. A grant counts only if it was issued by the turn's
 * authority to this actor in this namespace (checked when the lease was indexed), is not
 * revoked, its purposes admit the turn's purpose, the instant lies in its window, and one of its
 * capabilities covers exactly this action on this resource. Among the grants that count, an
 * unbounded one allows outright; a bounded one must be consumed, atomically, in the usage
 * store — the last step, so a refused call spends nothing.
 *
 * When nothing matches, "discovery" decides which refusal the caller hears: if the actor still
 * holds a live, unspent grant for the action the tool is visible and the caller is told
 * `no_matching_grant`; otherwise `tool_unavailable`, which says nothing about tickets. The owner
 * learns the real reason from audit.
 */

export type Verdict =
  | { readonly allowed: true; readonly grant: IndexedGrant }
  | {
      readonly allowed: false;
      readonly code: CallerCode;
      readonly reason: AuditReason;
      readonly grant?: IndexedGrant;
    };

export interface DecisionScope {
  readonly index: GrantIndex;
  readonly usage: GrantUsageStore | undefined;
  readonly namespaceId: string;
}

const NOTHING_GRANTED: Verdict = Object.freeze({
  allowed: false,
  code: "tool_unavailable",
  reason: "no_capability",
});
const STORE_DOWN: Verdict = Object.freeze({
  allowed: false,
  code: "tool_unavailable",
  reason: "usage_store_unavailable",
});

function windowReason(grant: IndexedGrant, now: number): AuditReason | undefined {
  if (now < grant.notBefore) return "not_yet_valid";
  if (now >= grant.expiresAt) return "expired";
  return undefined;
}

export async function decide(
  scope: DecisionScope,
  action: string,
  resource: ResourceRef,
  now: number,
): Promise<Verdict> {
  const entry = scope.index.get(action);
  if (entry === undefined) return NOTHING_GRANTED;
  const buckets = coveringBuckets(entry, resource.namespace, resource.owner, resource.path);

  // Pass 1: a live unbounded grant allows without touching the usage store.
  let matchedReason: AuditReason | undefined;
  let matchedGrant: IndexedGrant | undefined; // the grant the reason is about, for audit
  let boundedLive = false;
  for (const bucket of buckets) {
    for (const grant of bucket) {
      const reason = grant.fixedReason ?? windowReason(grant, now);
      if (reason !== undefined) {
        const stronger = strongerReason(matchedReason, reason);
        if (stronger !== matchedReason) matchedGrant = grant;
        matchedReason = stronger;
      } else if (grant.maxUses === undefined) return { allowed: true, grant };
      else boundedLive = true;
    }
  }

  // Pass 2: consume a live bounded grant, exactly once, after every other check passed.
  let spentMatch: IndexedGrant | undefined;
  if (boundedLive) {
    if (scope.usage === undefined) return STORE_DOWN;
    for (const bucket of buckets) {
      for (const grant of bucket) {
        if (grant.maxUses === undefined || grant.fixedReason !== undefined) continue;
        if (windowReason(grant, now) !== undefined) continue;
        if (grant.spent) {
          spentMatch ??= grant;
          continue;
        }
        let consumed: boolean;
        try {
          const result = await scope.usage.tryConsume(scope.namespaceId, grant.id, grant.maxUses);
          consumed = result.consumed;
          if (result.used >= grant.maxUses) grant.spent = true;
        } catch {
          return STORE_DOWN;
        }
        if (consumed) return { allowed: true, grant };
        grant.spent = true;
        spentMatch ??= grant;
      }
    }
  }
  if (spentMatch !== undefined) {
    matchedReason = "grant_exhausted";
    matchedGrant = spentMatch;
  }

  // Nothing matched: discovery tells which refusal the caller may hear.
  const visibility = await discover(scope, entry, now);
  if (visibility === "store_down") return STORE_DOWN;
  if (visibility === "visible") {
    return refusal("no_matching_grant", matchedReason ?? "no_capability", matchedGrant);
  }
  return refusal("tool_unavailable", matchedReason ?? visibility, matchedGrant);
}

function refusal(code: CallerCode, reason: AuditReason, grant: IndexedGrant | undefined): Verdict {
  return grant === undefined
    ? { allowed: false, code, reason }
    : { allowed: false, code, reason, grant };
}

/**
 * Is the action discoverable now? It is when a live unbounded grant exists, or a live bounded
 * one the usage store reports unspent. Reads usage, never consumes. When hidden, says why.
 */
export async function discover(
  scope: DecisionScope,
  entry: ActionIndex,
  now: number,
): Promise<"visible" | "store_down" | AuditReason> {
  for (const grant of entry.unbounded) {
    if (windowReason(grant, now) === undefined) return "visible";
  }
  let hidden: AuditReason | undefined = entry.fixedReason;
  for (const grant of entry.unbounded)
    hidden = strongerReason(hidden, windowReason(grant, now) ?? "no_capability");

  const bounded = entry.bounded;
  const count = bounded.length;
  for (let step = 0; step < count; step++) {
    const position = (entry.boundedHint + step) % count;
    const grant = bounded[position] as IndexedGrant;
    const outside = windowReason(grant, now);
    if (outside !== undefined) {
      hidden = strongerReason(hidden, outside);
      continue;
    }
    if (scope.usage === undefined) {
      hidden = strongerReason(hidden, "usage_store_unavailable");
      continue;
    }
    if (!grant.spent) {
      let used: number;
      try {
        used = await scope.usage.getUsage(scope.namespaceId, grant.id);
      } catch {
        return "store_down";
      }
      if (used < (grant.maxUses as number)) {
        entry.boundedHint = position;
        return "visible";
      }
      grant.spent = true;
    }
    hidden = strongerReason(hidden, "grant_exhausted");
  }
  return hidden ?? "no_capability";
}
