import { openingMs } from "../contracts/instants.js";
import { type Capability, type Grant, MAX_DELEGATION_DEPTH } from "../contracts/schemas.js";
import type { ErrorCode } from "../contracts/vocabulary.js";

/** The codes a link refuses with when a child would allow something its parent does not. */
export type WideningCode = Extract<
  ErrorCode,
  | "delegation_too_deep"
  | "delegation_wider_path"
  | "delegation_wider_scope"
  | "delegation_other_owner"
  | "delegation_wider_action"
  | "delegation_assembled_capability"
  | "delegation_wider_purpose"
  | "delegation_wider_window"
  | "delegation_wider_uses"
>;

function isPrefix(prefix: readonly string[], path: readonly string[]): boolean {
  if (prefix.length > path.length) return false;
  // Whole segments: `cell-3` is never a prefix of `cell-30`.
  for (let i = 0; i < prefix.length; i++) if (prefix[i] !== path[i]) return false;
  return true;
}

/** Does the parent capability reach the child's resource at all (namespace and path)? */
function reaches(parent: Capability, child: Capability): boolean {
  if (parent.resource.namespace !== child.resource.namespace) return false;
  const p = parent.resource.path;
  const c = child.resource.path;
  // An exact parent reaches only its own path; descendants reach everything below it too.
  return parent.scope === "exact" ? p.length === c.length && isPrefix(p, c) : isPrefix(p, c);
}

/**
 * One child capability against the parent's, axis by axis, each narrowing the candidates the
 * last one left: a capability must fit inside ONE parent capability — path, scope, owner and
 * every action together — or it would be assembled from pieces the parent never held as one.
 */
function capabilityRefusal(
  parents: readonly Capability[],
  child: Capability,
): WideningCode | undefined {
  // The common case first, allocating nothing: one parent capability holds the child whole.
  for (const p of parents) if (contains(p, child)) return undefined;
  let candidates = parents.filter((p) => reaches(p, child));
  if (candidates.length === 0) return "delegation_wider_path";
  candidates = candidates.filter((p) => p.scope === "descendants" || child.scope === "exact");
  if (candidates.length === 0) return "delegation_wider_scope";
  // An owner-less capability serves any owner, so dropping the parent's owner widens it.
  candidates = candidates.filter(
    (p) => p.resource.owner === undefined || p.resource.owner === child.resource.owner,
  );
  if (candidates.length === 0) return "delegation_other_owner";
  if (candidates.some((p) => child.actions.every((a) => p.actions.includes(a)))) return undefined;
  const pooled = child.actions.every((a) => candidates.some((p) => p.actions.includes(a)));
  return pooled ? "delegation_assembled_capability" : "delegation_wider_action";
}

function contains(parent: Capability, child: Capability): boolean {
  const owner = parent.resource.owner;
  return (
    reaches(parent, child) &&
    (parent.scope === "descendants" || child.scope === "exact") &&
    (owner === undefined || owner === child.resource.owner) &&
    child.actions.every((a) => parent.actions.includes(a))
  );
}

/** The instant a grant starts counting: its issue time or its notBefore, whichever is later. */
function opens(grant: Grant): number {
  const issued = openingMs(grant.issuedAt);
  const notBefore = grant.constraints.notBefore;
  return notBefore === undefined ? issued : Math.max(issued, openingMs(notBefore));
}

function closes(grant: Grant): number {
  const expiresAt = grant.constraints.expiresAt;
  return expiresAt === undefined ? Number.POSITIVE_INFINITY : Date.parse(expiresAt);
}

/**
 * Identical instants need no parsing: a turn opening over thousands of links whose child
 * repeats its parent's window (the usual derivation) pays for no Date.parse at all.
 */
function windowWidened(parent: Grant, child: Grant): boolean {
  const p = parent.constraints;
  const c = child.constraints;
  if (
    parent.issuedAt === child.issuedAt &&
    p.notBefore === c.notBefore &&
    p.expiresAt === c.expiresAt
  ) {
    return false;
  }
  return opens(child) < opens(parent) || closes(child) > closes(parent);
}

/** The deepest chain position a grant's descendants may take. */
export function depthLimit(grant: Grant): number {
  return grant.constraints.maxDepth ?? MAX_DELEGATION_DEPTH;
}

/**
 * Why `child` is not a narrowing of `parent`, or undefined when it is. Checked when a grant is
 * derived and again, link by link, every time a turn opens, so a chain edited in the store after
 * derivation cannot widen. Each axis is checked on its own: a child that looks narrower overall
 * but widens one axis is refused, with that axis's code. Omitted constraints mean "no limit",
 * so a child that drops a limit its parent has is wider, never silently inherits it.
 */
export function wideningOf(parent: Grant, child: Grant): WideningCode | undefined {
  const limit = depthLimit(parent);
  if ((child.depth ?? 0) > limit || depthLimit(child) > limit) return "delegation_too_deep";
  for (const capability of child.capabilities) {
    const refusal = capabilityRefusal(parent.capabilities, capability);
    if (refusal !== undefined) return refusal;
  }
  const parentPurposes = parent.constraints.purposes;
  if (parentPurposes !== undefined) {
    const purposes = child.constraints.purposes;
    if (purposes === undefined || !purposes.every((p) => parentPurposes.includes(p))) {
      return "delegation_wider_purpose";
    }
  }
  if (windowWidened(parent, child)) return "delegation_wider_window";
  const parentUses = parent.constraints.maxUses;
  if (parentUses !== undefined) {
    const uses = child.constraints.maxUses;
    if (uses === undefined || uses > parentUses) return "delegation_wider_uses";
  }
  return undefined;
}
