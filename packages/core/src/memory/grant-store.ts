import { randomUUID } from "node:crypto";
import { redact, TesseraError } from "../contracts/errors.js";
import { type Grant, type GrantInput, GrantSchema } from "../contracts/schemas.js";
import { checkId, checkRevocationInstant, parseGrantInput } from "../contracts/store-input.js";
import { versionsSynchronously } from "../kernel/sync-ports.js";
import { isSealedGrant, sealValidatedGrant } from "../kernel/validated-grants.js";
import type { GrantStore } from "../ports/grant-source.js";

/**
 * Grants held in memory, for tests, demos and single-process hosts. Stored grants are
 * validated once, deeply frozen and never edited in place (so a lease need not parse them
 * again): a revocation stores a new object, so a lease that already read
 * the old one keeps its snapshot and the revocation lands on the next turn.
 *
 * Every change bumps the holder's version in the same synchronous step, so no reader can see
 * the change without the bump. Versions are prefixed with a per-store random epoch: two stores
 * (say, one rebuilt after a restart) never hand out the same token for different grant sets.
 */
export class InMemoryGrantStore implements GrantStore {
  readonly #namespaces = new Map<string, Map<string, Grant>>();
  /** namespace → subject → number of changes so far. */
  /** namespace → subject → [count, version text]: the text built once per change, not per read. */
  readonly #versions = new Map<string, Map<string, readonly [number, string]>>();
  readonly #epoch = randomUUID();

  async add(input: GrantInput): Promise<Grant> {
    const grant = sealed(input);
    const grants = this.#grantsOf(grant.namespaceId);
    if (grants.has(grant.id)) {
      throw new TesseraError("invalid_grant", `grant ${redact(grant.id)} already exists`);
    }
    grants.set(grant.id, grant);
    this.#bump(grant.namespaceId, grant.subject);
    return grant;
  }

  /**
   * All or nothing: every input is validated before the first one is stored, and the batch is
   * stored in one synchronous step that undoes itself when an ID is taken (by the store or by
   * the batch itself), so no reader ever sees part of it. Grants sealed by this library
   * (fan-out builds them) are already valid and frozen, so they are stored as they are.
   */
  async addMany(inputs: readonly GrantInput[]): Promise<readonly Grant[]> {
    if (!Array.isArray(inputs)) throw new TesseraError("invalid_input", "addMany takes an array");
    const batch = inputs.map(sealed);
    // One has and one set per grant: a batch check in a set of its own cost as much again.
    let stored = 0;
    let grants: Map<string, Grant> | undefined;
    let namespaceId: string | undefined;
    for (; stored < batch.length; stored++) {
      const grant = batch[stored] as Grant;
      if (grant.namespaceId !== namespaceId || grants === undefined) {
        namespaceId = grant.namespaceId;
        grants = this.#grantsOf(namespaceId);
      }
      if (grants.has(grant.id)) break;
      grants.set(grant.id, grant);
    }
    if (stored < batch.length) {
      // Every grant stored so far took an ID that was free: deleting it restores the store.
      for (let i = 0; i < stored; i++) {
        const grant = batch[i] as Grant;
        this.#namespaces.get(grant.namespaceId)?.delete(grant.id);
      }
      const taken = batch[stored] as Grant;
      throw new TesseraError("invalid_grant", `grant ${redact(taken.id)} already exists`);
    }
    this.#bumpAll(batch);
    return Object.freeze(batch);
  }

  async revoke(namespaceId: string, grantId: string, at: Date = new Date()): Promise<boolean> {
    checkId(namespaceId, "namespaceId");
    checkId(grantId, "grantId");
    checkRevocationInstant(at);
    const grants = this.#namespaces.get(namespaceId);
    const grant = grants?.get(grantId);
    if (grants === undefined || grant === undefined) return false;
    if (grant.revokedAt === undefined) {
      const revoked = GrantSchema.parse(Object.assign({}, grant, { revokedAt: at.toISOString() }));
      grants.set(grantId, sealValidatedGrant(revoked));
      this.#bump(namespaceId, grant.subject);
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

  async grantsVersion(namespaceId: string, subject: string): Promise<string> {
    return this.#version(namespaceId, subject);
  }

  static {
    // A warm turn reads versions without awaiting them: see kernel/sync-ports.ts.
    versionsSynchronously(InMemoryGrantStore.prototype.grantsVersion, (store, ns, subject) =>
      (store as InMemoryGrantStore).#version(ns, subject),
    );
  }

  #version(namespaceId: string, subject: string): string {
    checkId(namespaceId, "namespaceId");
    checkId(subject, "subject");
    return this.#versions.get(namespaceId)?.get(subject)?.[1] ?? `${this.#epoch}.0`;
  }

  async listNamespace(namespaceId: string): Promise<readonly Grant[]> {
    checkId(namespaceId, "namespaceId");
    return [...(this.#namespaces.get(namespaceId)?.values() ?? [])];
  }

  #grantsOf(namespaceId: string): Map<string, Grant> {
    let grants = this.#namespaces.get(namespaceId);
    if (grants === undefined) {
      grants = new Map();
      this.#namespaces.set(namespaceId, grants);
    }
    return grants;
  }

  /** One bump per (namespace, subject) the batch touched; a batch is usually one holder's. */
  #bumpAll(batch: readonly Grant[]): void {
    const bumped = new Map<string, Set<string>>();
    let last: Grant | undefined;
    for (const grant of batch) {
      if (last !== undefined && grant.namespaceId === last.namespaceId) {
        if (grant.subject === last.subject) continue;
      }
      last = grant;
      let subjects = bumped.get(grant.namespaceId);
      if (subjects === undefined) {
        subjects = new Set();
        bumped.set(grant.namespaceId, subjects);
      }
      if (subjects.has(grant.subject)) continue;
      subjects.add(grant.subject);
      this.#bump(grant.namespaceId, grant.subject);
    }
  }

  #bump(namespaceId: string, subject: string): void {
    let subjects = this.#versions.get(namespaceId);
    if (subjects === undefined) {
      subjects = new Map();
      this.#versions.set(namespaceId, subjects);
    }
    const count = (subjects.get(subject)?.[0] ?? 0) + 1;
    subjects.set(subject, [count, `${this.#epoch}.${count}`]);
  }
}

/** A grant this library sealed is valid and frozen already; anything else is parsed. */
function sealed(input: GrantInput): Grant {
  if (isSealedGrant(input)) return input;
  return sealValidatedGrant(parseGrantInput(input));
}

/** @deprecated Renamed `InMemoryGrantStore` (it is a whole `GrantStore`); kept for one release. */
export const InMemoryGrantSource = InMemoryGrantStore;
/** @deprecated Renamed `InMemoryGrantStore`; kept for one release. */
export type InMemoryGrantSource = InMemoryGrantStore;
