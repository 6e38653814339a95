import type { AccessContext, Grant } from "../contracts/schemas.js";
import { GrantSchema, MAX_DELEGATION_DEPTH } from "../contracts/schemas.js";
import type { GrantReason } from "../contracts/vocabulary.js";
import { wideningOf } from "../delegation/narrower.js";
import type { GrantSource } from "../ports/grant-source.js";
import { isSealedGrant } from "./validated-grants.js";

/**
 * What the chain above a grant says about it, computed once per lease. Internal and never
 * handed out (audit copies `ids`), so not frozen: freezing thousands of small objects at
 * every turn open cost more than resolving the links.
 */
export interface ChainInfo {
  /** Why the chain does not count (an ancestor missing, revoked, widened; a foreign root). */
  readonly reason: GrantReason | undefined;
  /** Grant IDs from the root to this grant, for audit and explain. */
  readonly ids: readonly string[];
}

/** The source failed or returned invalid material while the chains were read. */
export const CHAINS_UNAVAILABLE = Symbol("chains unavailable");

/**
 * Resolves the chain of every derived grant the actor holds, through the trusted grant source
 * only: a parent is held by its child's issuer, so it is found in `listGrants(namespace,
 * issuer)`. Each holder is listed once per turn and indexed by grant ID, and each ancestor is
 * judged once however many descendants share it, so opening a turn costs one listing per
 * distinct delegator plus a look-up per link — never a scan per grant.
 *
 * A derived grant counts only if every ancestor is present, not revoked, and each link is
 * still a narrowing of its parent (`wideningOf`, the same check `deriveGrant` made): a store
 * edited after derivation cannot widen a chain. Window and purpose of ancestors need no
 * separate check: each link is within its parent's, so the leaf's own are the tightest. The
 * root's issuer must be the turn's authority — the rule for a single grant, generalised.
 *
 * Returns undefined when the actor holds no derived grant (the common case costs nothing).
 *
 * With `versions`, each other holder's grants version is read before its grants and recorded
 * there (undefined when the source could not say): a turn cache keeps the chains only while
 * every one of them is unchanged.
 */
export async function resolveChains(
  source: GrantSource,
  ctx: AccessContext,
  grants: readonly Grant[],
  versions?: Map<string, string | undefined>,
): Promise<ReadonlyMap<Grant, ChainInfo> | undefined | typeof CHAINS_UNAVAILABLE> {
  let frontier = grants.filter((g) => g.parentId !== undefined && isOfTurn(g, ctx));
  if (frontier.length === 0) return undefined;
  // subject → (grant ID → grant): the holders read so far. The actor's own grants are known,
  // and indexed only if some parent is held by the actor itself (rare: most turns skip it).
  const holders = new Map<string, Map<string, Grant>>();
  if (frontier.some((g) => g.issuer === ctx.actor)) holders.set(ctx.actor, byId(grants));
  // Level by level: every holder one level up is listed at once, then their derived grants
  // become the next level. Depth strictly falls along a valid chain, so this ends by the cap.
  const seen = new Set<Grant>(frontier);
  for (let level = 0; frontier.length > 0 && level <= MAX_DELEGATION_DEPTH; level++) {
    const missing = [...new Set(frontier.map((g) => g.issuer))].filter((s) => !holders.has(s));
    const listed = await Promise.all(
      missing.map((subject) => listHolder(source, ctx, subject, versions)),
    );
    for (let i = 0; i < missing.length; i++) {
      const held = listed[i];
      if (held === undefined) return CHAINS_UNAVAILABLE;
      holders.set(missing[i] as string, held);
    }
    const next: Grant[] = [];
    for (const grant of frontier) {
      const parent = holders.get(grant.issuer)?.get(grant.parentId as string);
      if (parent?.parentId !== undefined && !seen.has(parent)) {
        seen.add(parent);
        next.push(parent);
      }
    }
    frontier = next;
  }
  const chains = new Map<Grant, ChainInfo>();
  for (const grant of grants) {
    if (grant.parentId !== undefined) infoOf(grant, ctx, holders, chains, 0);
  }
  return chains;
}

function isOfTurn(grant: Grant, ctx: AccessContext): boolean {
  return grant.namespaceId === ctx.namespaceId && grant.subject === ctx.actor;
}

function byId(grants: readonly Grant[]): Map<string, Grant> {
  const map = new Map<string, Grant>();
  for (const grant of grants) map.set(grant.id, grant);
  return map;
}

/** One delegator's grants, validated like the actor's; undefined fails the turn closed. */
async function listHolder(
  source: GrantSource,
  ctx: AccessContext,
  subject: string,
  versions: Map<string, string | undefined> | undefined,
): Promise<Map<string, Grant> | undefined> {
  // Before the grants, as for the actor: a change racing the listing only makes it read again.
  if (versions !== undefined) versions.set(subject, await grantsVersionOf(source, ctx, subject));
  let material: readonly unknown[];
  try {
    material = await source.listGrants(ctx.namespaceId, subject);
  } catch {
    return undefined;
  }
  if (!Array.isArray(material)) return undefined;
  const map = new Map<string, Grant>();
  for (const item of material) {
    let grant: Grant;
    if (isSealedGrant(item)) grant = item;
    else {
      const parsed = GrantSchema.safeParse(item);
      if (!parsed.success) return undefined;
      grant = parsed.data;
    }
    // A source that answers with someone else's grant does not make it this holder's.
    if (grant.namespaceId === ctx.namespaceId && grant.subject === subject) {
      map.set(grant.id, grant);
    }
  }
  return map;
}

/** The holder's grants version, or undefined when the source has none or cannot say. */
export async function grantsVersionOf(
  source: GrantSource,
  ctx: AccessContext,
  subject: string,
): Promise<string | undefined> {
  if (typeof source.grantsVersion !== "function") return undefined;
  try {
    const version = await source.grantsVersion(ctx.namespaceId, subject);
    return typeof version === "string" ? version : undefined;
  } catch {
    return undefined;
  }
}

function infoOf(
  grant: Grant,
  ctx: AccessContext,
  holders: ReadonlyMap<string, ReadonlyMap<string, Grant>>,
  chains: Map<Grant, ChainInfo>,
  hops: number,
): ChainInfo {
  const known = chains.get(grant);
  if (known !== undefined) return known;
  let info: ChainInfo;
  const own: GrantReason | undefined = grant.revokedAt === undefined ? undefined : "revoked";
  if (grant.parentId === undefined) {
    const reason = grant.issuer !== ctx.authority ? "issuer_mismatch" : own;
    info = { reason, ids: [grant.id] };
  } else {
    const parent = holders.get(grant.issuer)?.get(grant.parentId);
    if (
      parent === undefined ||
      hops > MAX_DELEGATION_DEPTH ||
      grant.depth !== (parent.depth ?? 0) + 1 ||
      wideningOf(parent, grant) !== undefined
    ) {
      info = { reason: "chain_broken", ids: [grant.id] };
    } else {
      const above = infoOf(parent, ctx, holders, chains, hops + 1);
      // A dead ancestor kills the chain; the grant's own revocation is the next news.
      info = { reason: above.reason ?? own, ids: [...above.ids, grant.id] };
    }
  }
  chains.set(grant, info);
  return info;
}
