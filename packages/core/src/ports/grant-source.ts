import type { Grant, GrantInput } from "../contracts/schemas.js";

/**
 * The only place authority comes from. The kernel reads it once per turn and validates every
 * grant it returns; material that fails validation fails the whole turn closed.
 */
export interface GrantSource {
  /** Every grant held by `subject` in `namespaceId`, revoked ones included. */
  listGrants(namespaceId: string, subject: string): Promise<readonly unknown[]>;
}

/** The host-side half: minting and revocation stay in the host's hands. */
export interface GrantStore extends GrantSource {
  add(grant: GrantInput): Promise<Grant>;
  /** Marks the grant revoked; returns false when no such grant exists. */
  revoke(namespaceId: string, grantId: string, at?: Date): Promise<boolean>;
  /** Every grant in the namespace (inspection, CLI). */
  listNamespace(namespaceId: string): Promise<readonly Grant[]>;
}
