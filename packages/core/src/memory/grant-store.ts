import { redact, TesseraError } from "../contracts/errors.js";
import { type Grant, type GrantInput, GrantSchema } from "../contracts/schemas.js";
import { checkId, checkRevocationInstant, parseGrantInput } from "../contracts/store-input.js";
import { sealValidatedGrant } from "../kernel/validated-grants.js";
import type { GrantStore } from "../ports/grant-source.js";

/**
 * Grants held in memory, for tests, demos and single-process hosts. Stored grants are
 * validated once, deeply frozen and never edited in place (so a lease need not parse them
 * again): a revocation stores a new object, so a lease that already read
 * the old one keeps its snapshot and the revocation lands on the next turn.
 */
export class InMemoryGrantStore implements GrantStore {
  readonly #namespaces = new Map<string, Map<string, Grant>>();

  async add(input: GrantInput): Promise<Grant> {
    const grant = sealValidatedGrant(parseGrantInput(input));
    let grants = this.#namespaces.get(grant.namespaceId);
    if (grants === undefined) {
      grants = new Map();
      this.#namespaces.set(grant.namespaceId, grants);
    }
    if (grants.has(grant.id)) {
      throw new TesseraError("invalid_grant", `grant ${redact(grant.id)} already exists`);
    }
    grants.set(grant.id, grant);
    return grant;
  }

  async revoke(namespaceId: string, grantId: string, at: Date = new Date()): Promise<boolean> {
    checkId(namespaceId, "namespaceId");
    checkId(grantId, "grantId");
    checkRevocationInstant(at);
    const grants = this.#namespaces.get(namespaceId);
    const grant = grants?.get(grantId);
    if (grants === undefined || grant === undefined) return false;
    if (grant.revokedAt === undefined) {
      const revoked = GrantSchema.parse({ ...grant, revokedAt: at.toISOString() });
      grants.set(grantId, sealValidatedGrant(revoked));
    }
    return true;
  }

  async listGrants(namespaceId: string, subject: string): Promise<readonly Grant[]> {
    checkId(namespaceId, "namespaceId");
    checkId(subject, "subject");
    const grants = this.#namespaces.get(namespaceId);
    if (grants === undefined) return [];
    const held: Grant[] = [];
    for (const grant of grants.values()) if (grant.subject === subject) held.push(grant);
    return held;
  }

  async listNamespace(namespaceId: string): Promise<readonly Grant[]> {
    checkId(namespaceId, "namespaceId");
    return [...(this.#namespaces.get(namespaceId)?.values() ?? [])];
  }
}

/** @deprecated Renamed `InMemoryGrantStore` (it is a whole `GrantStore`); kept for one release. */
export const InMemoryGrantSource = InMemoryGrantStore;
/** @deprecated Renamed `InMemoryGrantStore`; kept for one release. */
export type InMemoryGrantSource = InMemoryGrantStore;
