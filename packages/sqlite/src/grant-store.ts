import {
  type Grant,
  type GrantInput,
  GrantSchema,
  type GrantStore,
  TesseraError,
} from "@tessera/core";
import { checkId, checkRevocationInstant, parseGrantInput } from "@tessera/core/store-kit";
import type { SqliteDatabase } from "./database.js";

const CODE = "grant_store_unavailable";

interface GrantRow {
  body: string;
  revoked_at: string | null;
}

/**
 * Grants as validated JSON, with the columns the kernel looks up by (namespace, subject) and
 * the revocation instant beside the body. Revocation is monotonic: the first instant stays.
 * Adding an ID that already exists in the namespace is refused, never an overwrite, so a
 * revoked grant cannot be revived by adding it again.
 */
export class SqliteGrantStore implements GrantStore {
  readonly #db: SqliteDatabase;

  constructor(db: SqliteDatabase) {
    this.#db = db;
  }

  async add(input: GrantInput): Promise<Grant> {
    const grant = parseGrantInput(input);
    const { revokedAt, ...body } = grant;
    const changes = this.#db.run(
      CODE,
      () =>
        this.#db
          .statement(
            `INSERT INTO tessera_grants (namespace_id, id, subject, issuer, revoked_at, body)
             VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (namespace_id, id) DO NOTHING`,
          )
          .run(
            grant.namespaceId,
            grant.id,
            grant.subject,
            grant.issuer,
            revokedAt ?? null,
            JSON.stringify(body),
          ).changes,
    );
    if (changes === 0) {
      throw new TesseraError(
        "invalid_grant",
        "a grant with this ID already exists in the namespace",
      );
    }
    return grant;
  }

  async revoke(namespaceId: string, grantId: string, at: Date = new Date()): Promise<boolean> {
    checkId(namespaceId, "namespaceId");
    checkId(grantId, "grantId");
    checkRevocationInstant(at);
    const changes = this.#db.run(
      CODE,
      () =>
        this.#db
          .statement(
            `UPDATE tessera_grants SET revoked_at = coalesce(revoked_at, ?)
             WHERE namespace_id = ? AND id = ?`,
          )
          .run(at.toISOString(), namespaceId, grantId).changes,
    );
    return changes > 0;
  }

  async listGrants(namespaceId: string, subject: string): Promise<readonly unknown[]> {
    checkId(namespaceId, "namespaceId");
    checkId(subject, "subject");
    const rows = this.#db.run(
      CODE,
      () =>
        this.#db
          .statement(
            "SELECT body, revoked_at FROM tessera_grants WHERE namespace_id = ? AND subject = ? ORDER BY rowid",
          )
          .all(namespaceId, subject) as GrantRow[],
    );
    // Returned unvalidated on purpose: the kernel validates grant material itself.
    return rows.map(toGrantMaterial);
  }

  async listNamespace(namespaceId: string): Promise<readonly Grant[]> {
    checkId(namespaceId, "namespaceId");
    const rows = this.#db.run(
      CODE,
      () =>
        this.#db
          .statement(
            "SELECT body, revoked_at FROM tessera_grants WHERE namespace_id = ? ORDER BY rowid",
          )
          .all(namespaceId) as GrantRow[],
    );
    return rows.map((row) => {
      const parsed = GrantSchema.safeParse(toGrantMaterial(row));
      if (!parsed.success)
        throw new TesseraError("invalid_grant", "a stored grant does not validate");
      return parsed.data;
    });
  }
}

function toGrantMaterial(row: GrantRow): unknown {
  const body = JSON.parse(row.body) as Record<string, unknown>;
  return row.revoked_at === null ? body : { ...body, revokedAt: row.revoked_at };
}
