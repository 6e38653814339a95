import type { CallerCode, GrantReason } from "../contracts/vocabulary.js";
import type { ConsumeResult, GrantUsageStore } from "../ports/usage-store.js";
import { discover, type Visibility, windowReason } from "./discovery.js";
import {
  type ActionIndex,
  coveredForAnotherOwner,
  coveringBuckets,
  type GrantIndex,
  type IndexedGrant,
  strongerReason,
} from "./grant-index.js";
import { consumeNowOf } from "./sync-ports.js";
import type { ResourceRef } from "./types.js";

/**
 * The decision itself, deny by default. A grant counts only if it was issued by the turn's
 * authority to this actor in this namespace (checked when the lease was indexed), is not
 * revoked, its purposes admit the turn's purpose, the instant lies in its window (which opens
 * at its issue time at the earliest), and one of its capabilities bound to the turn's owner
 * covers exactly this action on this resource. The request's own owner is checked against the
 * turn's before this runs. Among the grants that count, an
 * unbounded one allows outright; a bounded one must be consumed, atomically, in the usage
 * store — the last step, so a refused call spends nothing.
 *
 * When nothing matches, "discovery" decides which refusal the caller hears: if the actor still
 * holds a live, unspent grant for the action the tool is visible and the caller is told
 * `no_matching_grant`; otherwise `tool_unavailable`, which says nothing about tickets. The owner
 * learns the real reason from audit.
 */

export type Verdict =
  | {
      readonly allowed: true;
      readonly grant: IndexedGrant;
      /**
       * Set when the scope defers spends (`deferSpend`): the grant is bounded and its use is
       * still to be spent, by the act that records the decision. Never set otherwise.
       */
      readonly spend?: true;
      /**
       * Set with `spend` when other grants not known spent cover the act too and the scope
       * `triesNextGrant`: the act may then go without its exhausted event, and a lost spend
       * means deciding again on the next grant.
       */
      readonly more?: true;
    }
  | {
      readonly allowed: false;
      readonly code: CallerCode;
      readonly reason: GrantReason;
      readonly grant?: IndexedGrant;
      readonly detail?: string;
    };

export interface DecisionScope {
  readonly index: GrantIndex;
  readonly usage: GrantUsageStore | undefined;
  readonly namespaceId: string;
  /**
   * Decide without spending: a bounded grant is chosen (the first live one not known spent)
   * and its use left to the act ledger, which spends it in the same transaction as the
   * decision's event. Usage is still read, never written, for discovery.
   */
  readonly deferSpend?: boolean;
  /**
   * With `deferSpend`, for an act ledger that `undoesLostSpends`: among several grants, the
   * first not known spent is chosen unread (`more` set), and an act whose spend loses is
   * decided again on the next one, instead of usage being read before choosing.
   */
  readonly triesNextGrant?: boolean;
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

/**
 * Decides synchronously whenever the usage store need not be asked — unbounded grants, and
 * refusals the lease can settle alone — or answers without yielding (the in-memory one,
 * consuming), and returns a promise only when it must await usage. The hot path therefore
 * costs no extra microtask.
 */
export function decide(
  scope: DecisionScope,
  action: string,
  resource: ResourceRef,
  now: number,
): Verdict | Promise<Verdict> {
  const entry = scope.index.get(action);
  if (entry === undefined) return NOTHING_GRANTED;
  const buckets = coveringBuckets(entry, resource.namespace, resource.path);

  // Pass 1: a live unbounded grant allows without touching the usage store.
  const match: Match = { reason: undefined, grant: undefined };
  let boundedLive = false;
  for (const bucket of buckets) {
    for (const grant of bucket) {
      const reason = grant.fixedReason ?? windowReason(grant, now);
      if (reason !== undefined) noteReason(match, reason, grant);
      else if (grant.maxUses === undefined) return { allowed: true, grant };
      else boundedLive = true;
    }
  }
  if (boundedLive) {
    if (scope.deferSpend === true) return chooseSpend(scope, entry, buckets, match, resource, now);
    if (scope.usage === undefined) return STORE_DOWN;
    return consume(scope, entry, buckets, match, resource, now);
  }
  return refuseAfterDiscovery(scope, entry, match, resource, now);
}

/** The strongest reason seen among the grants that cover the resource, and its grant. */
interface Match {
  reason: GrantReason | undefined;
  grant: IndexedGrant | undefined;
}

function noteReason(match: Match, reason: GrantReason, grant: IndexedGrant): void {
  const stronger = strongerReason(match.reason, reason);
  if (stronger !== match.reason) match.grant = grant;
  match.reason = stronger;
}

/** May pass 2 try to spend this grant? Bounded, counting in this turn, inside its window. */
function spendable(grant: IndexedGrant, now: number): boolean {
  return (
    grant.maxUses !== undefined &&
    grant.fixedReason === undefined &&
    windowReason(grant, now) === undefined
  );
}

/**
 * Pass 2: consume a live bounded grant, exactly once, after every other check passed. A store
 * that answers synchronously (see sync-ports.ts) is asked without awaiting: the same calls in
 * the same order, so the same grant is spent; only the microtasks between them are gone.
 */
function consume(
  scope: DecisionScope,
  entry: ActionIndex,
  buckets: readonly IndexedGrant[][],
  match: Match,
  resource: ResourceRef,
  now: number,
): Verdict | Promise<Verdict> {
  const usage = scope.usage as GrantUsageStore;
  const consumeNow = consumeNowOf(usage);
  if (consumeNow === undefined) return consumeAwaiting(scope, entry, buckets, match, resource, now);
  let spentMatch: IndexedGrant | undefined;
  for (const bucket of buckets) {
    for (const grant of bucket) {
      if (!spendable(grant, now)) continue;
      if (grant.spent) {
        spentMatch ??= grant;
        continue;
      }
      const maxUses = grant.maxUses as number;
      let result: ConsumeResult;
      try {
        result = consumeNow(usage, scope.namespaceId, grant.id, maxUses);
      } catch {
        return STORE_DOWN;
      }
      if (result.used >= maxUses) grant.spent = true;
      if (result.consumed) return { allowed: true, grant };
      grant.spent = true;
      spentMatch ??= grant;
    }
  }
  return refuseSpent(scope, entry, match, spentMatch, resource, now);
}

async function consumeAwaiting(
  scope: DecisionScope,
  entry: ActionIndex,
  buckets: readonly IndexedGrant[][],
  match: Match,
  resource: ResourceRef,
  now: number,
): Promise<Verdict> {
  const usage = scope.usage as GrantUsageStore;
  let spentMatch: IndexedGrant | undefined;
  for (const bucket of buckets) {
    for (const grant of bucket) {
      if (!spendable(grant, now)) continue;
      if (grant.spent) {
        spentMatch ??= grant;
        continue;
      }
      const maxUses = grant.maxUses as number;
      let consumed: boolean;
      try {
        const result = await usage.tryConsume(scope.namespaceId, grant.id, maxUses);
        consumed = result.consumed;
        if (result.used >= maxUses) grant.spent = true;
      } catch {
        return STORE_DOWN;
      }
      if (consumed) return { allowed: true, grant };
      grant.spent = true;
      spentMatch ??= grant;
    }
  }
  return refuseSpent(scope, entry, match, spentMatch, resource, now);
}

/**
 * Pass 2 for a deferred spend: the first live bounded grant not known spent, to be spent by
 * the act that records the decision. One grant per act: when its act finds the last use gone,
 * the act records the exhausted event rather than trying the next grant (its claim, if any, is
 * already recorded as refused in that same write), unless the scope `triesNextGrant`: then
 * an act with other candidates goes without its exhausted event, records nothing when it
 * loses, and is decided again on the next grant (`ledger-lease.ts`).
 */
function chooseSpend(
  scope: DecisionScope,
  entry: ActionIndex,
  buckets: readonly IndexedGrant[][],
  match: Match,
  resource: ResourceRef,
  now: number,
): Verdict | Promise<Verdict> {
  let spentMatch: IndexedGrant | undefined;
  const candidates: IndexedGrant[] = [];
  for (const bucket of buckets) {
    for (const grant of bucket) {
      if (!spendable(grant, now)) continue;
      if (!grant.spent) candidates.push(grant);
      else spentMatch ??= grant;
    }
  }
  const only = candidates.length === 1 ? candidates[0] : undefined;
  if (only !== undefined) return { allowed: true, grant: only, spend: true };
  if (candidates.length === 0) return refuseSpent(scope, entry, match, spentMatch, resource, now);
  if (scope.triesNextGrant === true) {
    return { allowed: true, grant: candidates[0] as IndexedGrant, spend: true, more: true };
  }
  return chooseAmong(scope, candidates);
}

/**
 * Several grants could be spent and the lease knows none of them spent (a view just built, as
 * after a grant was added): the first with a use left, read from the usage store — a read, not
 * a write — so a spent first ticket does not refuse an act another ticket covers. The last is
 * chosen unread: its act finds out. Acts in flight at once read the same counts, so they choose
 * the same grant, and every one that finds its last use taken is refused (`no_matching_grant`,
 * audit `grant_exhausted`) though another grant may still have uses: 60 `authorize` calls at
 * once on grants of 5 and 3 uses over the composed ledger, 5 allowed and 55 refused, the 3
 * unused. Nothing is ever spent twice. A ledger that undoes lost spends (SQLite, PostgreSQL,
 * Redis) decides such acts on the other grants instead (docs/architecture.md).
 */
async function chooseAmong(
  scope: DecisionScope,
  candidates: readonly IndexedGrant[],
): Promise<Verdict> {
  const usage = scope.usage;
  for (let i = 0; i < candidates.length - 1; i++) {
    const grant = candidates[i] as IndexedGrant;
    if (usage === undefined) return { allowed: true, grant, spend: true };
    let used: number;
    try {
      used = await usage.getUsage(scope.namespaceId, grant.id);
    } catch {
      return STORE_DOWN;
    }
    if (used < (grant.maxUses as number)) return { allowed: true, grant, spend: true };
    grant.spent = true;
  }
  return { allowed: true, grant: candidates[candidates.length - 1] as IndexedGrant, spend: true };
}

/**
 * The refusal for an act whose chosen grant turned out spent (its act lost the last use), from
 * what the lease knows without asking the store again: the tool stays visible (and the caller
 * hears `no_matching_grant`) when a live unbounded grant, or a live bounded grant not known
 * spent, remains for the action; otherwise `tool_unavailable`. Audit says `grant_exhausted`.
 */
export function exhaustedRefusal(
  entry: ActionIndex | undefined,
  chosen: IndexedGrant,
  now: number,
): { readonly code: CallerCode; readonly reason: "grant_exhausted" } {
  const live = (grant: IndexedGrant) =>
    grant.fixedReason === undefined && windowReason(grant, now) === undefined;
  const visible =
    entry !== undefined &&
    (entry.unbounded.some(live) ||
      entry.bounded.some((grant) => grant !== chosen && !grant.spent && live(grant)));
  return { code: visible ? "no_matching_grant" : "tool_unavailable", reason: "grant_exhausted" };
}

/** No bounded grant could be spent: a spent one, if seen, is the reason. */
function refuseSpent(
  scope: DecisionScope,
  entry: ActionIndex,
  match: Match,
  spentMatch: IndexedGrant | undefined,
  resource: ResourceRef,
  now: number,
): Verdict | Promise<Verdict> {
  if (spentMatch !== undefined) {
    match.reason = "grant_exhausted";
    match.grant = spentMatch;
  }
  return refuseAfterDiscovery(scope, entry, match, resource, now);
}

/** Nothing matched: discovery tells which refusal the caller may hear. */
function refuseAfterDiscovery(
  scope: DecisionScope,
  entry: ActionIndex,
  match: Match,
  resource: ResourceRef,
  now: number,
): Verdict | Promise<Verdict> {
  // No grant of the turn's owner covers the resource, but another owner's does: say so. That
  // grant stays unnamed — it is not this owner's to see in their audit.
  if (
    match.reason === undefined &&
    coveredForAnotherOwner(entry, resource.namespace, resource.path)
  ) {
    match.reason = "owner_mismatch";
  }
  const visibility = discover(scope, entry, now);
  if (typeof visibility === "string") return refusalFor(visibility, match);
  return visibility.then((seen) => refusalFor(seen, match));
}

function refusalFor(visibility: Visibility, match: Match): Verdict {
  if (visibility === "store_down") return STORE_DOWN;
  const code: CallerCode = visibility === "visible" ? "no_matching_grant" : "tool_unavailable";
  // The reason is about this call's resource; why the tool as a whole is hidden (every ticket
  // spent, say) goes in the detail, so explain() still tells apart "never granted" and "spent".
  const reason = match.reason ?? "no_capability";
  const hiddenBecause =
    match.reason === undefined && visibility !== "visible" && visibility !== "no_capability"
      ? `tool hidden: ${visibility}`
      : undefined;
  // Built field by field, not by spreading: this is the deny hot path.
  const verdict: {
    allowed: false;
    code: CallerCode;
    reason: GrantReason;
    grant?: IndexedGrant;
    detail?: string;
  } = { allowed: false, code, reason };
  if (match.grant !== undefined) verdict.grant = match.grant;
  if (hiddenBecause !== undefined) verdict.detail = hiddenBecause;
  return verdict;
}
