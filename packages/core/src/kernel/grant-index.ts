import { openingMs } from "../contracts/instants.js";
import type { AccessContext, Grant } from "../contracts/schemas.js";
import type { GrantReason } from "../contracts/vocabulary.js";
import type { ChainInfo } from "./chains.js";

/**
 * The grant set of one lease, compiled once when the lease opens so that a decision is a few
 * Map lookups: grants are bucketed by action, then by resource namespace, then along a trie of
 * the path their capability names. Everything that cannot change during the turn — issuer,
 * revocation, purpose, owner — is judged here, once; only the time window and usage are judged
 * per decision.
 *
 * A turn acts for one owner, `ctx.owner` (or for nobody when it names none). A capability
 * naming no owner is bound to that owner; one naming the turn's owner is the same; one naming
 * any other owner never counts in this turn, and is indexed apart only so that audit can tell
 * the owner why (`owner_mismatch`). So the tries hold exactly the capabilities this turn may
 * use, and the request's owner (checked against the turn's before deciding) needs no lookup.
 */

export interface IndexedGrant {
  readonly grant: Grant;
  readonly id: string;
  /** Undefined for an unbounded grant. */
  readonly maxUses: number | undefined;
  /** When the grant counts; shared by grants with the same instants. */
  readonly window: GrantWindow;
  /** Why the grant never counts in this turn (issuer, revocation, purpose), if it doesn't. */
  readonly fixedReason: GrantReason | undefined;
  /** A derived grant's chain, root first, for audit; undefined for a root grant. */
  readonly chain: readonly string[] | undefined;
  /**
   * Set once a bounded grant has been seen spent in this lease. Usage only ever grows, so a
   * spent grant stays spent and the lease need not ask the store again; "unspent" is never
   * cached, because another turn or process may spend it at any moment.
   */
  spent: boolean;
}

/**
 * Epoch milliseconds; -Infinity / +Infinity when the grant sets no bound. A grant counts from
 * its issue time at the earliest: one issued in the future is not yet valid. An object of its
 * own so that grants issued together share one: two numbers on every indexed grant were two
 * boxed doubles each, 10,000 of them per fan-out for the collector to copy.
 */
export interface GrantWindow {
  readonly notBefore: number;
  readonly expiresAt: number;
}

/**
 * One node of a resource-path trie. Walking a path is one Map lookup per segment and builds
 * no strings; segments are Map keys, so they compare whole — `cell-3` and `cell-30` are
 * different children, and neither is reached through the other.
 */
export interface PathNode {
  children: Map<string, PathChild> | undefined;
  /** Grants whose capability names exactly this path. */
  exact: IndexedGrant[] | undefined;
  /** Grants whose capability covers this path and everything below it. */
  descendants: IndexedGrant[] | undefined;
}

/**
 * A child of a node. A path that only exact grants name, with nothing below it, is their bucket
 * alone rather than a node holding it: most grants (every fan-out ticket) name one leaf, and a
 * node per leaf was 10,000 more objects to build and for the collector to copy. A leaf becomes
 * a node the moment a longer path or a descendants grant reaches it.
 */
export type PathChild = PathNode | IndexedGrant[];

/** A path trie per resource namespace. */
type NamespaceRoots = Map<string, PathNode>;

export interface ActionIndex {
  /** Capabilities the turn's owner may use. */
  readonly namespaces: NamespaceRoots;
  /** Capabilities naming another owner: never allow, only tell audit `owner_mismatch`. */
  foreign: NamespaceRoots | undefined;
  /** Grants for the action with no fixed reason, split by whether usage bounds them. */
  readonly unbounded: IndexedGrant[];
  readonly bounded: IndexedGrant[];
  /** Every grant in `bounded` before this position is known spent: discovery starts here. */
  spentBefore: number;
  /** The most telling fixed reason among the action's grants, for "why is the tool hidden". */
  fixedReason: GrantReason | undefined;
}

export type GrantIndex = ReadonlyMap<string, ActionIndex>;

/**
 * Lower rank wins when several grants fail for different reasons: tell the owner the most.
 * Total over `GrantReason`, so a new reason does not compile until it is ranked here.
 */
const REASON_RANK: Record<GrantReason, number> = {
  grant_exhausted: 0,
  usage_store_unavailable: 1,
  revoked: 2,
  expired: 3,
  not_yet_valid: 4,
  purpose_mismatch: 5,
  chain_broken: 6,
  issuer_mismatch: 7,
  owner_mismatch: 8,
  no_capability: 9,
};

export function strongerReason(
  current: GrantReason | undefined,
  candidate: GrantReason,
): GrantReason {
  if (current === undefined) return candidate;
  return REASON_RANK[candidate] < REASON_RANK[current] ? candidate : current;
}

/**
 * The windows of grants being indexed, remembering the last one made: grants issued together
 * (fan-out tickets, a host's batch) share their instants, and parsing the same strings again
 * for each of 10,000 grants was a sixth of indexing them.
 */
class Windows {
  #issuedAt: string | undefined;
  #notBefore: string | undefined;
  #expiresAt: string | undefined;
  #last: GrantWindow | undefined;

  of(grant: Grant): GrantWindow {
    const { issuedAt } = grant;
    const { notBefore, expiresAt } = grant.constraints;
    const last = this.#last;
    if (
      last !== undefined &&
      issuedAt === this.#issuedAt &&
      notBefore === this.#notBefore &&
      expiresAt === this.#expiresAt
    ) {
      return last;
    }
    const made: GrantWindow = {
      notBefore: Math.max(
        notBefore === undefined ? Number.NEGATIVE_INFINITY : openingMs(notBefore),
        openingMs(issuedAt),
      ),
      expiresAt: expiresAt === undefined ? Number.POSITIVE_INFINITY : Date.parse(expiresAt),
    };
    this.#issuedAt = issuedAt;
    this.#notBefore = notBefore;
    this.#expiresAt = expiresAt;
    this.#last = made;
    return made;
  }
}

function fixedReasonOf(
  grant: Grant,
  ctx: AccessContext,
  chain: ChainInfo | undefined,
): GrantReason | undefined {
  if (grant.parentId !== undefined) {
    // A derived grant answers to its chain: the root's issuer must be the turn's authority,
    // and every ancestor must stand. Without a resolved chain it never counts.
    if (chain === undefined) return "chain_broken";
    if (chain.reason !== undefined) return chain.reason;
  } else if (grant.issuer !== ctx.authority) return "issuer_mismatch";
  if (grant.revokedAt !== undefined) return "revoked";
  const purposes = grant.constraints.purposes;
  if (purposes !== undefined && (ctx.purpose === undefined || !purposes.includes(ctx.purpose))) {
    return "purpose_mismatch";
  }
  return undefined;
}

function newNode(): PathNode {
  return { children: undefined, exact: undefined, descendants: undefined };
}

function rootFor(roots: NamespaceRoots, namespace: string): PathNode {
  let node = roots.get(namespace);
  if (node === undefined) {
    node = newNode();
    roots.set(namespace, node);
  }
  return node;
}

/** The node for `segment` under `node`, created (or grown from a leaf bucket) as needed. */
function childNode(node: PathNode, segment: string): PathNode {
  node.children ??= new Map();
  const child = node.children.get(segment);
  if (child !== undefined && !Array.isArray(child)) return child;
  const grown: PathNode = { children: undefined, exact: child, descendants: undefined };
  node.children.set(segment, grown);
  return grown;
}

/** The node for `path` under the root of `namespace`, created as needed. */
function nodeFor(roots: NamespaceRoots, namespace: string, path: readonly string[]): PathNode {
  let node = rootFor(roots, namespace);
  for (const segment of path) node = childNode(node, segment);
  return node;
}

/** Files an exact grant at `path`: in a leaf bucket when nothing else lives there. */
function addExact(
  roots: NamespaceRoots,
  namespace: string,
  path: readonly string[],
  grant: IndexedGrant,
): void {
  let node = rootFor(roots, namespace);
  const last = path.length - 1;
  for (let i = 0; i < last; i++) node = childNode(node, path[i] as string);
  if (last < 0) {
    node.exact = addTo(node.exact, grant);
    return;
  }
  const segment = path[last] as string;
  node.children ??= new Map();
  const child = node.children.get(segment);
  if (child === undefined) node.children.set(segment, [grant]);
  else if (Array.isArray(child)) addTo(child, grant);
  else child.exact = addTo(child.exact, grant);
}

function addTo(list: IndexedGrant[] | undefined, grant: IndexedGrant): IndexedGrant[] {
  if (list === undefined) return [grant];
  // A grant naming the same resource twice is listed once.
  if (list[list.length - 1] !== grant) list.push(grant);
  return list;
}

function actionIndexFor(index: Map<string, ActionIndex>, action: string): ActionIndex {
  let entry = index.get(action);
  if (entry === undefined) {
    entry = {
      namespaces: new Map(),
      foreign: undefined,
      unbounded: [],
      bounded: [],
      spentBefore: 0,
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
export function buildGrantIndex(
  grants: readonly Grant[],
  ctx: AccessContext,
  chains?: ReadonlyMap<Grant, ChainInfo>,
): GrantIndex {
  const index = new Map<string, ActionIndex>();
  const windows = new Windows();
  for (const grant of grants) {
    if (grant.namespaceId !== ctx.namespaceId || grant.subject !== ctx.actor) continue;
    const chain = grant.parentId === undefined ? undefined : chains?.get(grant);
    const indexed: IndexedGrant = {
      grant,
      id: grant.id,
      maxUses: grant.constraints.maxUses,
      window: windows.of(grant),
      fixedReason: fixedReasonOf(grant, ctx, chain),
      chain: chain?.ids,
      spent: false,
    };
    // Actions this grant was already counted under (most grants carry one capability, one
    // action: the set is only made when a second one shows up).
    let counted: string | Set<string> | undefined;
    for (const capability of grant.capabilities) {
      const { namespace, path, owner } = capability.resource;
      const usable = owner === undefined || owner === ctx.owner;
      for (const action of capability.actions) {
        const entry = actionIndexFor(index, action);
        if (!usable) entry.foreign ??= new Map();
        const roots = usable ? entry.namespaces : (entry.foreign as NamespaceRoots);
        if (capability.scope === "exact") addExact(roots, namespace, path, indexed);
        else {
          const node = nodeFor(roots, namespace, path);
          node.descendants = addTo(node.descendants, indexed);
        }
        if (!usable) {
          // Not the turn's authority, so not discoverable either; it only explains a hidden tool.
          entry.fixedReason = strongerReason(entry.fixedReason, "owner_mismatch");
          continue;
        }
        if (counted === action || (typeof counted === "object" && counted.has(action))) continue;
        if (counted === undefined) counted = action;
        else if (typeof counted === "string") counted = new Set([counted, action]);
        else counted.add(action);
        if (indexed.fixedReason !== undefined) {
          entry.fixedReason = strongerReason(entry.fixedReason, indexed.fixedReason);
        } else if (indexed.maxUses === undefined) entry.unbounded.push(indexed);
        else entry.bounded.push(indexed);
      }
    }
  }
  return index;
}

const NO_BUCKETS: readonly IndexedGrant[][] = Object.freeze([]);

function collect(found: IndexedGrant[][] | undefined, list: IndexedGrant[]): IndexedGrant[][] {
  if (found === undefined) return [list];
  found.push(list);
  return found;
}

function walk(
  root: PathNode | undefined,
  path: readonly string[],
  start: IndexedGrant[][] | undefined,
): IndexedGrant[][] | undefined {
  let found = start;
  let node = root;
  if (node === undefined) return found;
  if (node.descendants !== undefined) found = collect(found, node.descendants);
  for (let i = 0; i < path.length; i++) {
    const child: PathChild | undefined = node.children?.get(path[i] as string);
    if (child === undefined) return found;
    // A leaf bucket: exact grants of this path only, so it counts only where the path ends.
    if (Array.isArray(child)) return i === path.length - 1 ? collect(found, child) : found;
    node = child;
    if (node.descendants !== undefined) found = collect(found, node.descendants);
  }
  if (node.exact !== undefined) found = collect(found, node.exact);
  return found;
}

/**
 * Every bucket whose grants cover `path` for the action in this turn: grants naming exactly
 * this path, and grants with descendants scope rooted at a prefix of it (the path itself
 * included). Only capabilities bound to the turn's owner are in the trie.
 */
export function coveringBuckets(
  entry: ActionIndex,
  namespace: string,
  path: readonly string[],
): readonly IndexedGrant[][] {
  return walk(entry.namespaces.get(namespace), path, undefined) ?? NO_BUCKETS;
}

/** Does a capability naming another owner cover `path`? Asked only on the refusal path. */
export function coveredForAnotherOwner(
  entry: ActionIndex,
  namespace: string,
  path: readonly string[],
): boolean {
  return (
    entry.foreign !== undefined && walk(entry.foreign.get(namespace), path, undefined) !== undefined
  );
}
