import { type Grant, type GrantInput, type GrantStore, TesseraError } from "@tessera/core";
import {
  checkId,
  checkRevocationInstant,
  parseGrantInput,
  storageDigest,
} from "@tessera/core/store-kit";
import type { Database } from "./database.js";
import { VersionReads } from "./version-reads.js";

/** SQLSTATE of a unique-key violation: an ID that exists already. */
const UNIQUE_VIOLATION = "23505";

interface GrantRow {
  body: string;
  revoked_at: string | null;
}

/**
 * Grants as validated JSON, one row per (namespace, grant id). Revocation is its own column,
 * set once (`COALESCE`), so revoking never rewrites the grant the issuer signed off on and a
 * second revoke keeps the first instant.
 */
export class PostgresGrantStore implements GrantStore {
  readonly #db: Database;
  readonly #sql: Record<"add" | "addMany" | "revoke" | "bySubject" | "byNamespace", string>;
  readonly #versions: VersionReads;
  /** The act ledger over the same database checks these versions with each act. */
  readonly versionSpace: object;

  constructor(db: Database) {
    this.#db = db;
    this.versionSpace = db.versionSpace;
    this.#versions = new VersionReads(db);
    const grants = db.table("grants");
    this.#sql = {
      add: `INSERT INTO ${grants} (namespace_key, grant_key, subject_key, body, revoked_at)
        VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING RETURNING grant_key`,
      // One statement for the batch, in input order (seq follows ordinality). No ON CONFLICT:
      // an existing ID, or one twice in the batch, fails the statement and inserts nothing.
      addMany: `INSERT INTO ${grants} (namespace_key, grant_key, subject_key, body, revoked_at)
        SELECT n, g, s, b, r FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])
          WITH ORDINALITY AS batch (n, g, s, b, r, i) ORDER BY i`,
      revoke: `UPDATE ${grants} SET revoked_at = COALESCE(revoked_at, $3)
        WHERE namespace_key = $1 AND grant_key = $2 RETURNING grant_key`,
      bySubject: `SELECT body, revoked_at FROM ${grants}
        WHERE namespace_key = $1 AND subject_key = $2 ORDER BY seq`,
      byNamespace: `SELECT body, revoked_at FROM ${grants} WHERE namespace_key = $1 ORDER BY seq`,
    };
  }

  async add(input: GrantInput): Promise<Grant> {
    const added = parseGrantInput(input);
    const { revokedAt, ...grant } = added;
    const inserted = await this.#db.query("grant_store_unavailable", this.#sql.add, [
      storageDigest(grant.namespaceId),
      storageDigest(grant.id),
      storageDigest(grant.subject),
      JSON.stringify(grant),
      revokedAt ?? null,
    ]);
    if (inserted.rowCount !== 1) {
      throw new TesseraError(
        "invalid_grant",
        "a grant with this id already exists in the namespace",
      );
    }
    return added;
  }

  async addMany(inputs: readonly GrantInput[]): Promise<readonly Grant[]> {
    if (!Array.isArray(inputs)) throw new TesseraError("invalid_input", "addMany takes an array");
    const added = inputs.map((input) => parseGrantInput(input));
    if (added.length === 0) return added;
    const columns: (string | null)[][] = [[], [], [], [], []];
    for (const { revokedAt, ...grant } of added) {
      columns[0]?.push(storageDigest(grant.namespaceId));
      columns[1]?.push(storageDigest(grant.id));
      columns[2]?.push(storageDigest(grant.subject));
      columns[3]?.push(JSON.stringify(grant));
      columns[4]?.push(revokedAt ?? null);
    }
    try {
      await this.#db.query("grant_store_unavailable", this.#sql.addMany, columns);
    } catch (error) {
      if ((error as { cause?: { code?: unknown } }).cause?.code === UNIQUE_VIOLATION) {
        throw new TesseraError(
          "invalid_grant",
          "a grant with this id already exists in the namespace",
        );
      }
      throw error;
    }
    return added;
  }

  /**
   * Kept by statement triggers (migration 3); "0" for a holder that never held a grant. Reads
   * that arrive while others are in flight share one statement (`version-reads.ts`). Not
   * `async`: the batch's own promise is returned, and a bad ID rejects this caller alone.
   */
  grantsVersion(namespaceId: string, subject: string): Promise<string> {
    try {
      checkId(namespaceId, "namespaceId");
      checkId(subject, "subject");
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#versions.read({
      namespaceKey: storageDigest(namespaceId),
      subjectKey: storageDigest(subject),
    });
  }

  async revoke(namespaceId: string, grantId: string, at: Date = new Date()): Promise<boolean> {
    checkId(namespaceId, "namespaceId");
    checkId(grantId, "grantId");
    checkRevocationInstant(at);
    const updated = await this.#db.query("grant_store_unavailable", this.#sql.revoke, [
      storageDigest(namespaceId),
      storageDigest(grantId),
      at.toISOString(),
    ]);
    return updated.rowCount === 1;
  }

  async listGrants(namespaceId: string, subject: string): Promise<readonly unknown[]> {
    checkId(namespaceId, "namespaceId");
    checkId(subject, "subject");
    const { rows } = await this.#db.query<GrantRow>(
      "grant_store_unavailable",
      this.#sql.bySubject,
      [storageDigest(namespaceId), storageDigest(subject)],
    );
    return rows.map(toGrant);
  }

  async listNamespace(namespaceId: string): Promise<readonly Grant[]> {
    checkId(namespaceId, "namespaceId");
    const { rows } = await this.#db.query<GrantRow>(
      "grant_store_unavailable",
      this.#sql.byNamespace,
      [storageDigest(namespaceId)],
    );
    return rows.map(toGrant);
  }
}

function toGrant(row: GrantRow): Grant {
  const grant = JSON.parse(row.body) as Grant;
  return row.revoked_at === null ? grant : { ...grant, revokedAt: row.revoked_at };
}
