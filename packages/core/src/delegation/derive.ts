import { z } from "zod";
import { isTesseraError, redact, TesseraError } from "../contracts/errors.js";
import type { Capability, Grant, GrantConstraints } from "../contracts/schemas.js";
import { checkMaxUses, grantSchemaError, parseGrantInput } from "../contracts/store-input.js";
import { releaseUse } from "../kernel/returned-uses.js";
import { sealValidatedGrant } from "../kernel/validated-grants.js";
import type { GrantStore } from "../ports/grant-source.js";
import type { GrantUsageStore } from "../ports/usage-store.js";
import { depthLimit, wideningOf } from "./narrower.js";

/** What a delegator asks for: the child's own ID, the delegate, and everything it may do. */
export interface DerivationRequest {
  readonly id: string;
  /** The delegate: who will hold the child grant. */
  readonly subject: string;
  readonly capabilities: readonly Capability[];
  /** Omitted limits mean "none", so a child under a limited parent must restate them. */
  readonly constraints?: GrantConstraints;
  /** Defaults to the parent's issue time (the function reads no clock). */
  readonly issuedAt?: string;
}

export interface DerivationOptions {
  /** The delegator: must be the parent's subject. */
  readonly issuer: string;
}

/**
 * The keys a `DerivationRequest` may hold, and only those: their values are checked as the
 * child's fields, by the grant schema.
 */
const anyValue = z.unknown().optional();
const RequestKeysSchema = z.strictObject({
  id: anyValue,
  subject: anyValue,
  capabilities: anyValue,
  constraints: anyValue,
  issuedAt: anyValue,
});

const WIDENING_MESSAGES: Record<NonNullable<ReturnType<typeof wideningOf>>, string> = {
  delegation_too_deep: "the child sits deeper, or allows a deeper chain, than the parent allows",
  delegation_wider_path: "a child resource lies outside every parent capability",
  delegation_wider_scope: "a child capability widens an exact parent capability to descendants",
  delegation_other_owner: "a child capability names another owner than the parent's, or none",
  delegation_wider_action: "a child capability holds an action the parent lacks there",
  delegation_assembled_capability:
    "a child capability is assembled from parts of several parent capabilities",
  delegation_wider_purpose: "the child's purposes are not within the parent's",
  delegation_wider_window: "the child's window is not within the parent's",
  delegation_wider_uses: "the child allows more uses than the parent",
};

/**
 * Derives a child grant from `parent` for a delegate, without going back to the owner. Pure:
 * it reads no store and no clock, and returns a frozen grant for the host to add to its grant
 * store (after `carveDelegatedUses` when the parent is bounded). It refuses rather than clamps
 * — a silently clamped delegation reads as accepted, and the delegator believes it passed on
 * more than it did — throwing a `TesseraError` whose code names the axis that widened.
 *
 * The kernel checks every link again each time a turn opens, so a derived grant is only ever
 * as good as its chain: revoke an ancestor and every descendant stops counting.
 */
export function deriveGrant(
  parent: Grant,
  request: DerivationRequest,
  options: DerivationOptions,
): Grant {
  const checkedParent = parseGrantInput(parent);
  if (typeof options?.issuer !== "string" || options.issuer !== checkedParent.subject) {
    throw new TesseraError(
      "delegation_not_holder",
      `only the holder of grant ${redact(checkedParent.id)} may derive from it`,
    );
  }
  if (checkedParent.revokedAt !== undefined) {
    throw new TesseraError(
      "delegation_parent_revoked",
      `grant ${redact(checkedParent.id)} is revoked`,
    );
  }
  // Before the child is built: a child past the hard cap would fail the schema, not name its axis.
  const depth = (checkedParent.depth ?? 0) + 1;
  if (depth > depthLimit(checkedParent)) {
    throw new TesseraError("delegation_too_deep", WIDENING_MESSAGES.delegation_too_deep);
  }
  if (typeof request !== "object" || request === null) {
    throw new TesseraError("invalid_grant", "a derivation request is an object");
  }
  // The child is built from the request's own fields only, so a key it does not know (a typo,
  // or a field the delegator may not set: `namespaceId`, `parentId` …) would pass silently.
  const keys = RequestKeysSchema.safeParse(request);
  if (!keys.success) throw grantSchemaError(keys.error.issues);
  // Where the child first fails the grant schema (`capabilities.0.actions: …`), as adding a
  // grant names it: the path's keys and an unrecognized key are redacted as IDs are.
  const child = parseGrantInput({
    id: request.id,
    namespaceId: checkedParent.namespaceId,
    issuer: options.issuer,
    subject: request.subject,
    capabilities: request.capabilities,
    constraints: request.constraints ?? {},
    issuedAt: request.issuedAt ?? checkedParent.issuedAt,
    parentId: checkedParent.id,
    depth,
  });
  const widened = wideningOf(checkedParent, child);
  if (widened !== undefined) {
    throw new TesseraError(
      widened,
      `cannot derive from ${redact(checkedParent.id)}: ${WIDENING_MESSAGES[widened]}`,
    );
  }
  return sealValidatedGrant(child);
}

/**
 * Carves a bounded child's budget out of its parent: spends the child's `maxUses` uses of the
 * parent in the usage store, all or nothing, so uses across the whole chain never exceed the
 * parent's. Call it after `deriveGrant` and before adding the child to the grant store; a host
 * that crashes in between loses those uses (fails closed), never gains any. A parent without
 * `maxUses` has nothing to carve. Throws `delegation_budget_exhausted` when the parent has
 * fewer unspent uses than the child asks for — nothing is spent then.
 */
export async function carveDelegatedUses(
  usage: GrantUsageStore,
  parent: Grant,
  child: Grant,
): Promise<void> {
  if (child.parentId !== parent.id || child.namespaceId !== parent.namespaceId) {
    throw new TesseraError("invalid_input", "the child grant was not derived from this parent");
  }
  const parentUses = parent.constraints.maxUses;
  if (parentUses === undefined) return;
  const count = child.constraints.maxUses;
  if (count === undefined || count > parentUses) {
    throw new TesseraError("delegation_wider_uses", "the child allows more uses than the parent");
  }
  checkMaxUses(count);
  if (typeof usage?.tryConsumeMany !== "function") {
    throw new TesseraError(
      "invalid_config",
      "carving a bounded parent needs a usage store with tryConsumeMany",
    );
  }
  const result = await usage.tryConsumeMany(parent.namespaceId, parent.id, count, parentUses);
  if (!result.consumed) {
    throw new TesseraError(
      "delegation_budget_exhausted",
      `grant ${redact(parent.id)} has fewer than ${count} unspent uses`,
    );
  }
}

/**
 * Carves `child`'s uses out of `parent` (`carveDelegatedUses`), then adds `child` to `grants`.
 * When the grant store refuses the child (`invalid_grant`: its ID taken, as by a second derive
 * racing the first), the child never existed, so the carved uses are given back, one
 * `releaseUse` each: a kernel over the same usage store that saw the parent spent meanwhile
 * forgets that mark, as it does for any use given back. Any other failure of `add` leaves
 * them spent: the child may have been stored before the answer was lost, and uses lost are
 * the safe side (never gained).
 */
export async function addDerivedGrant(
  grants: Pick<GrantStore, "add">,
  usage: GrantUsageStore,
  parent: Grant,
  child: Grant,
): Promise<Grant> {
  await carveDelegatedUses(usage, parent, child);
  try {
    return await grants.add(child);
  } catch (error) {
    if (isTesseraError(error, "invalid_grant")) await returnCarvedUses(usage, parent, child);
    throw error;
  }
}

async function returnCarvedUses(
  usage: GrantUsageStore,
  parent: Grant,
  child: Grant,
): Promise<void> {
  const carved = parent.constraints.maxUses === undefined ? 0 : (child.constraints.maxUses ?? 0);
  for (let i = 0; i < carved; i++) {
    try {
      // Undefined when the store has no `release`: the uses stay spent (fails safe).
      if ((await releaseUse(usage, parent.namespaceId, parent.id)) === undefined) return;
    } catch {
      // The refusal is what the caller must hear; a use not given back stays spent (safe).
      return;
    }
  }
}
