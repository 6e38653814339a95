import type { AccessContext, Grant } from "../contracts/schemas.js";
import type { AuditReason } from "../contracts/vocabulary.js";
import { ownerPart, resourceKey } from "./resource-key.js";

/**
 * The grant set of one lease, compiled once when the lease opens so that a decision is a few
 * Map lookups: grants are bucketed by action, then by the injective key of the resource their
 * capability names (see resource-key.ts). Everything that cannot change during the turn —
 * issuer, revocation, purpose — is judged here, once; only the time window and usage are
 * judged per decision.
 */

export interface IndexedGrant {
  readonly grant: Grant;
  readonly id: string;
  /** Undefined for an unbounded grant. */
  readonly maxUses: number | undefined;
  /** Epoch milliseconds; -Infinity / +Infinity when the grant sets no bound. */
  readonly notBefore: number;
  readonly expiresAt: number;
  /** Why the grant never counts in this turn (issuer, revocation, purpose), if it doesn't. */
  readonly fixedReason: AuditReason | undefined;
  /**
   * Set once a bounded grant has been seen spent in this lease. Usage only ever grows, so a
   * spent grant stays spent and the lease need not ask the store again; "unspent" is never
   * cached, because another turn or process may spend it at any moment.
   */
  spent: boolean;
}

export interface ActionIndex {
  readonly exact: Map<string, IndexedGrant[]>;
  /** Only built when some capability for the action has `scope: "descendants"`. */
  descendants: Map<string, IndexedGrant[]> | undefined;
  /** Grants for the action with no fixed reason, split by whether usage bounds them. */
  readonly unbounded: IndexedGrant[];
  readonly bounded: IndexedGrant[];
  /** Position in `bounded` of the last grant seen unspent: where discovery starts looking. */
  boundedHint: number;
  /** The most telling fixed reason among the action's grants, for "why is the tool hidden". */
  fixedReason: AuditReason | undefined;
}

export type GrantIndex = ReadonlyMap<string, ActionIndex>;

/** Lower rank wins when several grants fail for different reasons: tell the owner the most. */
const REASON_RANK: Partial<Record<AuditReason, number>> = {
  grant_exhausted: 0,
  usage_store_unavailable: 1,
  revoked: 2,
  expired: 3,
  not_yet_valid: 4,
  purpose_mismatch: 5,
  issuer_mismatch: 6,
  no_capability: 7,
};

export function strongerReason(
  current: AuditReason | undefined,
  candidate: AuditReason,
): AuditReason {
  if (current === undefined) return candidate;
  return (REASON_RANK[candidate] ?? 99) < (REASON_RANK[current] ?? 99) ? candidate : current;
}

function epoch(instant: string | undefined, fallback: number): number {
  return instant === undefined ? fallback : Date.parse(instant);
}

function fixedReasonOf(grant: Grant, ctx: AccessContext): AuditReason | undefined {
  if (grant.issuer !== ctx.authority) return "issuer_mismatch";
  if (grant.revokedAt !== undefined) return "revoked";
  const purposes = grant.constraints.purposes;
  if (purposes !== undefined && (ctx.purpose === undefined || !purposes.includes(ctx.purpose))) {
    return "purpose_mismatch";
  }
  return undefined;
}

function bucket(map: Map<string, IndexedGrant[]>, key: string, grant: IndexedGrant): void {
  const list = map.get(key);
  if (list === undefined) map.set(key, [grant]);
  // A grant naming the same resource twice is listed once.
  else if (list[list.length - 1] !== grant) list.push(grant);
}

function actionIndexFor(index: Map<string, ActionIndex>, action: string): ActionIndex {
  let entry = index.get(action);
  if (entry === undefined) {
    entry = {
      exact: new Map(),
      descendants: undefined,
      unbounded: [],
      bounded: [],
      boundedHint: 0,
      fixedReason: undefined,
    };
    index.set(action, entry);
  }
  return entry;
}

/**
 * Indexes validated grants for one (namespace, actor). Grants of another namespace or subject
 * are left out: they are not the actor's authority, whatever the source returned.
 */
export function buildGrantIndex(grants: readonly Grant[], ctx: AccessContext): GrantIndex {
  const index = new Map<string, ActionIndex>();
  for (const grant of grants) {
    if (grant.namespaceId !== ctx.namespaceId || grant.subject !== ctx.actor) continue;
    const indexed: IndexedGrant = {
      grant,
      id: grant.id,
      maxUses: grant.constraints.maxUses,
      notBefore: epoch(grant.constraints.notBefore, Number.NEGATIVE_INFINITY),
      expiresAt: epoch(grant.constraints.expiresAt, Number.POSITIVE_INFINITY),
      fixedReason: fixedReasonOf(grant, ctx),
      spent: false,
    };
    const seenActions = new Set<string>();
    for (const capability of grant.capabilities) {
      const { namespace, path, owner } = capability.resource;
      const key = resourceKey(namespace, ownerPart(owner), path);
      for (const action of capability.actions) {
        const entry = actionIndexFor(index, action);
        if (capability.scope === "exact") bucket(entry.exact, key, indexed);
        else {
          entry.descendants ??= new Map();
          bucket(entry.descendants, key, indexed);
        }
        if (seenActions.has(action)) continue;
        seenActions.add(action);
        if (indexed.fixedReason !== undefined) {
          entry.fixedReason = strongerReason(entry.fixedReason, indexed.fixedReason);
        } else if (indexed.maxUses === undefined) entry.unbounded.push(indexed);
        else entry.bounded.push(indexed);
      }
    }
  }
  return index;
}

/**
 * Every bucket whose grants cover `path` for `action`: the exact bucket, and each descendants
 * bucket rooted at a prefix of the path (the path itself included). A capability without an
 * owner covers any owner; one with an owner covers only that owner's resource.
 */
export function coveringBuckets(
  entry: ActionIndex,
  namespace: string,
  owner: string | undefined,
  path: readonly string[],
): IndexedGrant[][] {
  const found: IndexedGrant[][] = [];
  const owners =
    owner === undefined ? [ownerPart(undefined)] : [ownerPart(owner), ownerPart(undefined)];
  for (const part of owners) {
    const exact = entry.exact.get(resourceKey(namespace, part, path));
    if (exact !== undefined) found.push(exact);
    const descendants = entry.descendants;
    if (descendants === undefined) continue;
    for (let length = 0; length <= path.length; length++) {
      const list = descendants.get(resourceKey(namespace, part, path, length));
      if (list !== undefined) found.push(list);
    }
  }
  return found;
}
