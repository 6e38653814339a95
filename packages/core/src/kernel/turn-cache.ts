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

export interface CachedGrants {
  readonly version: string;
  /** The holder's grants, every one validated. */
  readonly grants: readonly Grant[];
  readonly views: Map<string, CachedView>;
  /** The weight of one copy: grants plus capabilities. */
  readonly unit: number;
}

/**
 * Validated, indexed grant sets of recent turns, per kernel, keyed by (namespace, subject) and
 * valid for one version of that subject's grants. Least recently used first out.
 *
 * The indexes are shared by every lease opened on them, the per-grant `spent` marks included.
 * That is safe because usage only grows (the usage port has no way to give a use back) and
 * the cache belongs to one kernel, so to one usage store: a grant seen spent stays spent, and
 * a stale mark could only refuse, never allow. "Unspent" is never cached (see grant-index.ts).
 */
export class TurnCache {
  readonly #entries = new Map<string, CachedGrants>();
  readonly #maxSubjects: number;
  readonly #maxWeight: number;
  #weight = 0;

  constructor(options: TurnCacheOptions = {}) {
    this.#maxSubjects = bound(options.maxSubjects, DEFAULT_MAX_SUBJECTS);
    this.#maxWeight = bound(options.maxWeight, DEFAULT_MAX_WEIGHT);
  }

  get size(): number {
    return this.#entries.size;
  }

  get weight(): number {
    return this.#weight;
  }

  /** The grant set cached at exactly `version`, marked most recently used. */
  get(namespaceId: string, subject: string, version: string): CachedGrants | undefined {
    const key = keyOf(namespaceId, subject);
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    if (entry.version !== version) {
      this.#drop(key, entry);
      return undefined;
    }
    this.#entries.delete(key);
    this.#entries.set(key, entry);
    return entry;
  }

  /** Caches a freshly read grant set with its first view (replacing any older version). */
  set(
    namespaceId: string,
    subject: string,
    version: string,
    grants: readonly Grant[],
    viewKey: string,
    view: CachedView,
  ): void {
    const key = keyOf(namespaceId, subject);
    const old = this.#entries.get(key);
    if (old !== undefined) this.#drop(key, old);
    const entry: CachedGrants = { version, grants, views: new Map(), unit: unitOf(grants) };
    if (entry.unit * 2 > this.#maxWeight) return;
    entry.views.set(viewKey, view);
    this.#entries.set(key, entry);
    this.#weight += entry.unit * 2;
    this.#evict();
  }

  /** Adds (or replaces) one turn shape's view of a cached set. */
  setView(entry: CachedGrants, viewKey: string, view: CachedView): void {
    if (!entry.views.has(viewKey)) {
      if (entry.views.size >= MAX_VIEWS) {
        const oldest = entry.views.keys().next().value as string;
        entry.views.delete(oldest);
        this.#weight -= entry.unit;
      }
      this.#weight += entry.unit;
    } else entry.views.delete(viewKey);
    entry.views.set(viewKey, view);
    this.#evict();
  }

  #evict(): void {
    for (const [key, entry] of this.#entries) {
      if (this.#entries.size <= this.#maxSubjects && this.#weight <= this.#maxWeight) return;
      this.#drop(key, entry);
    }
  }

  #drop(key: string, entry: CachedGrants): void {
    if (this.#entries.get(key) !== entry) return;
    this.#entries.delete(key);
    this.#weight -= entry.unit * (1 + entry.views.size);
  }
}

/** Length-prefixed, so no pair of IDs (NUL and separators included) can share a key. */
function keyOf(namespaceId: string, subject: string): string {
  return `${namespaceId.length}:${namespaceId}${subject}`;
}

/** The turn shape a view is built for: authority, owner, purpose (absent ones kept apart). */
export function viewKeyOf(authority: string, owner?: string, purpose?: string): string {
  return JSON.stringify([authority, owner ?? null, purpose ?? null]);
}

function unitOf(grants: readonly Grant[]): number {
  let unit = grants.length;
  for (const grant of grants) unit += grant.capabilities.length;
  return Math.max(unit, 1);
}

function bound(value: number | undefined, fallback: number): number {
  return value !== undefined && Number.isSafeInteger(value) && value >= 0 ? value : fallback;
}
