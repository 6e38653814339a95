import type { Grant, GrantInput } from "../contracts/schemas.js";

/**
 * The only place authority comes from. The kernel reads it once per turn and validates every
 * grant it returns; material that fails validation fails the whole turn closed.
 */
export interface GrantSource {
  /** Every grant held by `subject` in `namespaceId`, revoked ones included. */
  listGrants(namespaceId: string, subject: string): Promise<readonly unknown[]>;
  /**
   * A token that changes whenever the grants `subject` holds in `namespaceId` change: every
   * add and every revoke bumps it, atomically with the change. While it is unchanged the
   * kernel may reuse the grant set it validated and indexed for an earlier turn, so opening a
   * turn costs one version read. Optional: a source without it is read in full every turn.
   * The kernel reads the version before the grants, so a change racing the read only ever
   * makes it read again.
   */
  grantsVersion?(namespaceId: string, subject: string): Promise<string>;
  /**
   * Where `grantsVersion` reads, as an identity (no meaning beyond it): an act ledger whose
   * `checksVersionsIn` is the same object checks these versions inside each act's
   * transaction, and the kernel then skips the version read of a warm turn. A source that
   * filters another's grants without changing when its versions move passes it on.
   */
  readonly versionSpace?: object;
}

/** The host-side half: minting and revocation stay in the host's hands. */
export interface GrantStore extends GrantSource {
  add(grant: GrantInput): Promise<Grant>;
  /**
   * Adds many grants at once, all or nothing (one transaction on a durable store): fan-out
   * issuance needs it. Optional; a store without it gets `add` once per grant.
   */
  addMany?(grants: readonly GrantInput[]): Promise<readonly Grant[]>;
  /** Marks the grant revoked; returns false when no such grant exists. */
  revoke(namespaceId: string, grantId: string, at?: Date): Promise<boolean>;
  /** Every grant in the namespace (inspection, CLI). */
  listNamespace(namespaceId: string): Promise<readonly Grant[]>;
}
