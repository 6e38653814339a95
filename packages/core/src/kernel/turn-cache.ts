import type { Grant } from "../contracts/schemas.js";
import type { ChainInfo } from "./chains.js";
import type { GrantIndex } from "./grant-index.js";

/** Bounds of a kernel's turn cache; `KernelOptions.turnCache`. */
export interface TurnCacheOptions {
  /** How many (namespace, subject) grant sets are kept, least recently used dropped first. */
  readonly maxSubjects?: number;
  /**
   * A memory bound, in units of one grant or one capability per copy held: a grant set of
   * 10,000 one-capability grants indexed for one turn shape weighs 40,000. A set heavier than
   * the whole budget is never cached.
   */
  readonly maxWeight?: number;
}

export const DEFAULT_MAX_SUBJECTS = 1_000;
export const DEFAULT_MAX_WEIGHT = 400_000;
/** Distinct turn shapes (authority, owner, purpose) kept per grant set. */
const MAX_VIEWS = 8;

/**
 * A grant set indexed for one turn shape. The index depends on the turn's authority (which
 * issuer counts, and which chain root), owner (which capabilities are usable) and purpose;
 * nothing else of the context reaches it (the instant is judged per decision).
 */
export interface CachedView {
  readonly chains: ReadonlyMap<Grant, ChainInfo> | undefined;
  /**
   * The version of every other holder the chains read, taken before reading them: the view
   * stands only while each is unchanged (a revoked ancestor must kill its descendants).
   */
  readonly holders: ReadonlyMap<string, string>;
  readonly index: GrantIndex;
}

export interface TurnShape {
  readonly authority: string;
  readonly owner?: string | undefined;
  readonly purpose?: string | undefined;
}

/** authority → owner → purpose → view: lookups on the context's own strings, nothing built. */
type Views = Map<string, Map<string | undefined, Map<string | undefined, CachedView>>>;

export interface CachedGrants {
  readonly namespaceId: string;
  readonly subject: string;
  readonly version: string;
  /** The holder's grants, every one validated. */
  readonly grants: readonly Grant[];
  readonly views: Views;
  /** Views in the order they were made, oldest first, for the per-set bound. */
  readonly shapes: TurnShape[];
  /** The weight of one copy: grants plus capabilities. */
  readonly unit: number;
}

/**
 * Validated, indexed grant sets of recent turns, per kernel, keyed by (namespace, subject) and
 * valid for one version of that subject's grants. Least recently used first out.
 *
 * The indexes are shared by every lease opened on them, the per-grant `spent` marks included.
 * The cache belongs to one kernel, so to one usage store, and a stale mark could only refuse,
 * never allow. Usage grows except when a use is given back (`releaseUse`, for an act that
 * never happened): then `forget` drops every set holding that grant, so the next turn reads
 * it afresh instead of refusing a ticket that is unspent again. "Unspent" is never cached
 * (see grant-index.ts).
 */
export class TurnCache {
  /** namespace → subject → set: nested, so a look-up builds no key string. */
  readonly #sets = new Map<string, Map<string, CachedGrants>>();
  /** Every set, least recently used first (a Set keeps insertion order). */
  readonly #recency = new Set<CachedGrants>();
  #last: CachedGrants | undefined;
  readonly #maxSubjects: number;
  readonly #maxWeight: number;
  #weight = 0;

  constructor(options: TurnCacheOptions = {}) {
    this.#maxSubjects = bound(options.maxSubjects, DEFAULT_MAX_SUBJECTS);
    this.#maxWeight = bound(options.maxWeight, DEFAULT_MAX_WEIGHT);
  }

  get size(): number {
    return this.#recency.size;
  }

  get weight(): number {
    return this.#weight;
  }

  /** The grant set cached for (namespace, subject) at whatever version; recency unchanged. */
  peek(namespaceId: string, subject: string): CachedGrants | undefined {
    return this.#sets.get(namespaceId)?.get(subject);
  }

  /** The grant set cached at exactly `version`, marked most recently used. */
  get(namespaceId: string, subject: string, version: string): CachedGrants | undefined {
    const entry = this.#sets.get(namespaceId)?.get(subject);
    if (entry === undefined) return undefined;
    if (entry.version !== version) {
      this.#drop(entry);
      return undefined;
    }
    if (entry !== this.#last) {
      this.#recency.delete(entry);
      this.#recency.add(entry);
      this.#last = entry;
    }
    return entry;
  }

  /**
   * Drops every cached set of the namespace that holds `grantId`: a use of it was given back,
   * and their views may mark it spent. Rare (a delivery that sent nothing), so a scan.
   */
  forget(namespaceId: string, grantId: string): void {
    const subjects = this.#sets.get(namespaceId);
    if (subjects === undefined) return;
    for (const entry of [...subjects.values()]) {
      if (entry.grants.some((grant) => grant.id === grantId)) this.#drop(entry);
    }
  }

  /** Caches a freshly read grant set with its first view (replacing any older version). */
  set(
    namespaceId: string,
    subject: string,
    version: string,
    grants: readonly Grant[],
    shape: TurnShape,
    view: CachedView,
  ): void {
    const old = this.#sets.get(namespaceId)?.get(subject);
    if (old !== undefined) this.#drop(old);
    const unit = unitOf(grants);
    if (unit * 2 > this.#maxWeight) return;
    const entry: CachedGrants = {
      namespaceId,
      subject,
      version,
      grants,
      views: new Map(),
      shapes: [],
      unit,
    };
    putView(entry, shape, view);
    let subjects = this.#sets.get(namespaceId);
    if (subjects === undefined) {
      subjects = new Map();
      this.#sets.set(namespaceId, subjects);
    }
    subjects.set(subject, entry);
    this.#recency.add(entry);
    this.#last = entry;
    this.#weight += unit * 2;
    this.#evict();
  }

  /** Adds (or replaces) one turn shape's view of a cached set. */
  setView(entry: CachedGrants, shape: TurnShape, view: CachedView): void {
    if (this.#sets.get(entry.namespaceId)?.get(entry.subject) !== entry) return;
    if (viewOf(entry, shape) === undefined) {
      if (entry.shapes.length >= MAX_VIEWS) {
        deleteView(entry, entry.shapes.shift() as TurnShape);
        this.#weight -= entry.unit;
      }
      this.#weight += entry.unit;
    }
    putView(entry, shape, view);
    this.#evict();
  }

  #evict(): void {
    for (const entry of this.#recency) {
      if (this.#recency.size <= this.#maxSubjects && this.#weight <= this.#maxWeight) return;
      this.#drop(entry);
    }
  }

  #drop(entry: CachedGrants): void {
    const subjects = this.#sets.get(entry.namespaceId);
    if (subjects?.get(entry.subject) !== entry) return;
    subjects.delete(entry.subject);
    if (subjects.size === 0) this.#sets.delete(entry.namespaceId);
    this.#recency.delete(entry);
    if (this.#last === entry) this.#last = undefined;
    this.#weight -= entry.unit * (1 + entry.shapes.length);
  }
}

/** The view of `entry` for the turn's shape, if one was built. */
export function viewOf(entry: CachedGrants, shape: TurnShape): CachedView | undefined {
  return entry.views.get(shape.authority)?.get(shape.owner)?.get(shape.purpose);
}

function putView(entry: CachedGrants, shape: TurnShape, view: CachedView): void {
  let owners = entry.views.get(shape.authority);
  if (owners === undefined) {
    owners = new Map();
    entry.views.set(shape.authority, owners);
  }
  let purposes = owners.get(shape.owner);
  if (purposes === undefined) {
    purposes = new Map();
    owners.set(shape.owner, purposes);
  }
  if (!purposes.has(shape.purpose)) {
    entry.shapes.push({ authority: shape.authority, owner: shape.owner, purpose: shape.purpose });
  }
  purposes.set(shape.purpose, view);
}

function deleteView(entry: CachedGrants, shape: TurnShape): void {
  const owners = entry.views.get(shape.authority);
  const purposes = owners?.get(shape.owner);
  purposes?.delete(shape.purpose);
  if (purposes?.size === 0) owners?.delete(shape.owner);
  if (owners?.size === 0) entry.views.delete(shape.authority);
}

function unitOf(grants: readonly Grant[]): number {
  let unit = grants.length;
  for (const grant of grants) unit += grant.capabilities.length;
  return Math.max(unit, 1);
}

function bound(value: number | undefined, fallback: number): number {
  return value !== undefined && Number.isSafeInteger(value) && value >= 0 ? value : fallback;
}
