// How a turn's grants are opened: read, validated and indexed; found in the kernel's turn
// cache at the holder's current version; or, where the act ledger checks versions, taken from
// the cache on trust. `kernel.ts` puts them under a lease.
import { type AccessContext, type Grant, GrantSchema } from "../contracts/schemas.js";
import type { ActLedger, GrantVersionCheck } from "../ports/act-ledger.js";
import { CHAINS_UNAVAILABLE, grantsVersionOf, resolveChains } from "./chains.js";
import { buildGrantIndex } from "./grant-index.js";
import { versionNowOf } from "./sync-ports.js";
import { type CachedView, type TurnCache, viewOf } from "./turn-cache.js";
import type { KernelOptions } from "./types.js";
import { isSealedGrant } from "./validated-grants.js";

/**
 * Reads and validates the turn's grant material. Any failure — the source throwing, a
 * non-array, one grant failing its schema — yields undefined: authority is never partly
 * trusted, so the whole turn fails closed.
 */
async function loadGrants(
  options: KernelOptions,
  ctx: AccessContext,
): Promise<Grant[] | undefined> {
  let material: readonly unknown[];
  try {
    material = await options.grants.listGrants(ctx.namespaceId, ctx.actor);
  } catch {
    return undefined;
  }
  if (!Array.isArray(material)) return undefined;
  const grants: Grant[] = [];
  for (const item of material) {
    if (isSealedGrant(item)) {
      grants.push(item);
      continue;
    }
    const parsed = GrantSchema.safeParse(item);
    if (!parsed.success) return undefined;
    grants.push(parsed.data);
  }
  return grants;
}

/**
 * Resolves the chains of `grants` and indexes them for the turn's shape; undefined when the
 * chains could not be read (the turn fails closed). `cacheable` is false when a holder's
 * version was unknown: such a view is used for this turn only.
 */
async function buildView(
  options: KernelOptions,
  ctx: AccessContext,
  grants: readonly Grant[],
): Promise<{ view: CachedView; cacheable: boolean } | undefined> {
  const versions = new Map<string, string | undefined>();
  const chains = await resolveChains(options.grants, ctx, grants, versions);
  if (chains === CHAINS_UNAVAILABLE) return undefined;
  const holders = new Map<string, string>();
  let cacheable = true;
  for (const [subject, version] of versions) {
    if (version === undefined) cacheable = false;
    else holders.set(subject, version);
  }
  return { view: { chains, holders, index: buildGrantIndex(grants, ctx, chains) }, cacheable };
}

/**
 * Is every holder a cached chain read still at the version it was read at? At once (no
 * promise) when the source answers versions synchronously, as the in-memory store does.
 */
function holdersUnchanged(
  options: KernelOptions,
  ctx: AccessContext,
  holders: ReadonlyMap<string, string>,
): boolean | Promise<boolean> {
  if (holders.size === 0) return true;
  const source = options.grants;
  const now = versionNowOf(source);
  if (now !== undefined) {
    try {
      for (const [subject, version] of holders) {
        if (now(source, ctx.namespaceId, subject) !== version) return false;
      }
      return true;
    } catch {
      return false;
    }
  }
  return holdersReadUnchanged(options, ctx, holders);
}

async function holdersReadUnchanged(
  options: KernelOptions,
  ctx: AccessContext,
  holders: ReadonlyMap<string, string>,
): Promise<boolean> {
  const reads: Promise<string | undefined>[] = [];
  for (const subject of holders.keys()) reads.push(grantsVersionOf(options.grants, ctx, subject));
  const now = await Promise.all(reads);
  let i = 0;
  for (const version of holders.values()) if (now[i++] !== version) return false;
  return true;
}

/**
 * The turn's indexed grants. With a cache and a versioned source, the version is read first:
 * while it (and the version of every holder a chain read) is unchanged, the validated set and
 * its index are reused, and opening costs that one read. Otherwise the set is read, validated
 * and indexed in full. A version read that fails only disables the cache for this turn.
 */
export async function openIndex(
  options: KernelOptions,
  cache: TurnCache | undefined,
  reads: ColdReads,
  ctx: AccessContext,
): Promise<CachedView | undefined> {
  let version: string | undefined;
  const source = options.grants;
  // The holders' versions of the view cached last for this shape go out beside the actor's
  // own, so a warm turn over delegated grants waits for one round of reads, not two. They
  // vouch for that view only: a view found under another version is checked afresh.
  let hinted: CachedView | undefined;
  let hintedHolders: boolean | Promise<boolean> | undefined;
  if (cache !== undefined && typeof source.grantsVersion === "function") {
    const last = cache.peek(ctx.namespaceId, ctx.actor);
    hinted = last === undefined ? undefined : viewOf(last, ctx);
    if (hinted !== undefined && hinted.holders.size > 0) {
      hintedHolders = holdersUnchanged(options, ctx, hinted.holders);
    }
    // At once from a source that answers synchronously; otherwise awaited inline rather than
    // through grantsVersionOf (one async frame less on every warm turn).
    const now = versionNowOf(source);
    try {
      const read =
        now === undefined
          ? await source.grantsVersion(ctx.namespaceId, ctx.actor)
          : now(source, ctx.namespaceId, ctx.actor);
      if (typeof read === "string") version = read;
    } catch {
      // Unknown version: this turn reads the source in full and caches nothing.
    }
  }
  if (cache !== undefined && version !== undefined) {
    const entry = cache.get(ctx.namespaceId, ctx.actor, version);
    if (entry !== undefined) {
      // The context is its own turn shape: authority, owner and purpose pick the view.
      const known = viewOf(entry, ctx);
      let unchanged: boolean | Promise<boolean> = false;
      if (known !== undefined) {
        unchanged =
          known === hinted && hintedHolders !== undefined
            ? hintedHolders
            : holdersUnchanged(options, ctx, known.holders);
      }
      if (typeof unchanged !== "boolean") unchanged = await unchanged;
      if (known !== undefined && unchanged) return known;
      const built = await buildView(options, ctx, entry.grants);
      if (built === undefined) return undefined;
      if (built.cacheable) cache.setView(entry, ctx, built.view);
      return built.view;
    }
  }
  if (version === undefined) {
    const grants = await loadGrants(options, ctx);
    if (grants === undefined) return undefined;
    return (await buildView(options, ctx, grants))?.view;
  }
  const known = version;
  return reads.view(ctx, version, async () => {
    const grants = await reads.grants(ctx, known, () => loadGrants(options, ctx));
    if (grants === undefined) return undefined;
    const built = await buildView(options, ctx, grants);
    if (built === undefined) return undefined;
    if (cache !== undefined && built.cacheable) {
      cache.set(ctx.namespaceId, ctx.actor, known, grants, ctx, built.view);
    }
    return built.view;
  });
}

/**
 * Full grant-set reads in flight, by (namespace, subject, version): the turns that find no
 * cached set for one version while another turn is reading it wait for that read instead of
 * each reading the whole set again (a cold start of 400 turns of one agent holding 800 grants
 * was 190 full reads on Redis). Only turns that read the *same* version join: each read its
 * version itself after it began, so a revocation that committed before a turn asked has bumped
 * the version that turn saw, and it never joins a read that may predate the revocation.
 */
export class ColdReads {
  readonly #grants = new Map<string, Promise<Grant[] | undefined>>();
  /** The same, one level up: a set read and indexed for one turn shape (authority, owner, purpose). */
  readonly #views = new Map<string, Promise<CachedView | undefined>>();

  /** The holder's grant set at `version`: read by the first turn to ask, shared while in flight. */
  grants(
    ctx: AccessContext,
    version: string,
    read: () => Promise<Grant[] | undefined>,
  ): Promise<Grant[] | undefined> {
    return join(this.#grants, setKey(ctx, version), read);
  }

  /**
   * The set indexed for the turn's shape. Indexing 800 grants for each of 400 turns cost more
   * than the read itself; turns of one shape share the index, as they would from the cache.
   */
  view(
    ctx: AccessContext,
    version: string,
    build: () => Promise<CachedView | undefined>,
  ): Promise<CachedView | undefined> {
    const { authority, owner, purpose } = ctx;
    const key =
      `${setKey(ctx, version)}\u0000${authority.length}:${authority}` +
      `${owner === undefined ? "-" : `${owner.length}:${owner}`}` +
      `${purpose === undefined ? "-" : `${purpose.length}:${purpose}`}`;
    return join(this.#views, key, build);
  }
}

/** Length-prefixed: no two (namespace, subject, version) triples make the same key. */
function setKey(ctx: AccessContext, version: string): string {
  return `${ctx.namespaceId.length}:${ctx.namespaceId}${ctx.actor.length}:${ctx.actor}${version.length}:${version}`;
}

function join<T>(
  inFlight: Map<string, Promise<T>>,
  key: string,
  start: () => Promise<T>,
): Promise<T> {
  let pending = inFlight.get(key);
  if (pending === undefined) {
    pending = start().finally(() => inFlight.delete(key));
    inFlight.set(key, pending);
  }
  return pending;
}

/**
 * A warm turn taken on trust: the view cached for the turn's shape, with the versions it was
 * built at (the holder's and every holder its chains read), and nothing read. Only for a
 * ledger that checks those versions in each act's transaction (`ActLedger.checksVersionsIn`):
 * an act that stands on them is refused `stale` if one moved, and a denial reads them before
 * it stands (see ledger-lease.ts), so nothing is decided on a version the store has left.
 */
export function trustedView(
  cache: TurnCache,
  ctx: AccessContext,
): { view: CachedView; versions: readonly GrantVersionCheck[] } | undefined {
  const entry = cache.peek(ctx.namespaceId, ctx.actor);
  if (entry === undefined) return undefined;
  const view = viewOf(entry, ctx);
  if (view === undefined) return undefined;
  // Marks it most recently used, as a read that found it would.
  cache.get(ctx.namespaceId, ctx.actor, entry.version);
  const namespaceId = ctx.namespaceId;
  const versions: GrantVersionCheck[] = [
    { namespaceId, subject: ctx.actor, version: entry.version },
  ];
  for (const [subject, version] of view.holders) versions.push({ namespaceId, subject, version });
  return { view, versions };
}

/** Whether `acts` checks, inside each act's transaction, the versions `grants` hands out. */
export function checksVersionsOf(acts: ActLedger | undefined, options: KernelOptions): boolean {
  const space = acts?.checksVersionsIn;
  return (
    space !== undefined &&
    space === options.grants.versionSpace &&
    typeof options.grants.grantsVersion === "function"
  );
}
