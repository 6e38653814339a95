import {
  type Grant,
  type GrantInput,
  GrantSchema,
  type GrantStore,
  redact,
  TesseraError,
} from "@tessera/core";
import { checkId, checkRevocationInstant, parseGrantInput } from "@tessera/core/store-kit";
import { cacheKey, type SqliteDatabase } from "./database.js";

const CODE = "grant_store_unavailable";

interface GrantRow {
  body: string;
  revoked_at: string | null;
}

/**
 * Grants as validated JSON, with the columns the kernel looks up by (namespace, subject) and
 * the revocation instant beside the body. Revocation is monotonic: the first instant stays.
 * Adding an ID that already exists in the namespace is refused, never an overwrite, so a
 * revoked grant cannot be revived by adding it again. Each holder's version lives in
 * tessera_grant_versions, kept by triggers (see migrations.ts).
 */
export class SqliteGrantStore implements GrantStore {
  readonly #db: SqliteDatabase;
  /** The act ledger over the same connection checks these versions in its transaction. */
  readonly versionSpace: object;

  constructor(db: SqliteDatabase) {
    this.#db = db;
    this.versionSpace = db.versionSpace;
  }

  async add(input: GrantInput): Promise<Grant> {
    const grant = parseGrantInput(input);
    const changes = this.#db.run(CODE, () => this.#insert(grant));
    if (changes === 0) {
      throw new TesseraError(
        "invalid_grant",
        "a grant with this ID already exists in the namespace",
      );
    }
    return grant;
  }

  /**
   * One transaction for the whole batch: every grant is validated before it opens, and an ID
   * that exists already (or twice in the batch) rolls every insert back.
   */
  async addMany(inputs: readonly GrantInput[]): Promise<readonly Grant[]> {
    if (!Array.isArray(inputs)) throw new TesseraError("invalid_input", "addMany takes an array");
    const grants = inputs.map((input) => parseGrantInput(input));
    this.#db.run(CODE, () =>
      this.#db.immediate(() => {
        for (const grant of grants) {
          if (this.#insert(grant) === 0) {
            throw new TesseraError(
              "invalid_grant",
              "a grant with this ID already exists in the namespace",
            );
          }
        }
      }),
    );
    return grants;
  }

  /** Inserts unless the ID exists; the version trigger bumps the holder in the same step. */
  #insert(grant: Grant): number {
    const { revokedAt, ...body } = grant;
    return this.#db
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
      ).changes;
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

  /**
   * Kept by triggers on tessera_grants (migration 3), so every change bumps it in its own
   * transaction. "0" for a holder that never held a grant. All a warm turn reads to open:
   * its file check may be a millisecond old (`versionRead`, database.ts), the version comes
   * back as one column, and no `async` frame wraps it.
   */
  grantsVersion(namespaceId: string, subject: string): Promise<string> {
    try {
      checkId(namespaceId, "namespaceId");
      checkId(subject, "subject");
      const version = this.#db.cachedRead(CODE, cacheKey("version", namespaceId, subject), () =>
        this.#db
          .statement(
            "SELECT salt || '.' || bumps FROM tessera_grant_versions WHERE namespace_id = ? AND subject = ?",
          )
          .pluck()
          .get(namespaceId, subject),
      );
      return Promise.resolve(typeof version === "string" ? version : "0");
    } catch (error) {
      return Promise.reject(error);
    }
  }

  async listNamespace(namespaceId: string): Promise<readonly Grant[]> {
    checkId(namespaceId, "namespaceId");
    const rows = this.#db.run(
      CODE,
      () =>
        this.#db
          .statement(
            "SELECT id, body, revoked_at FROM tessera_grants WHERE namespace_id = ? ORDER BY rowid",
          )
          .all(namespaceId) as (GrantRow & { id: string })[],
    );
    return rows.map((row) => {
      const parsed = GrantSchema.safeParse(toGrantMaterial(row));
      if (!parsed.success) {
        // Named, so an operator can find the row; the ID is stored text, so labelled if odd.
        const where = parsed.error.issues[0]?.path.join(".") || "(root)";
        throw new TesseraError(
          "invalid_grant",
          `the stored grant ${redact(row.id)} does not validate (${where}): the store was edited outside Tessera`,
        );
      }
      return parsed.data;
    });
  }
}

function toGrantMaterial(row: GrantRow): unknown {
  const body = JSON.parse(row.body) as Record<string, unknown>;
  return row.revoked_at === null ? body : { ...body, revokedAt: row.revoked_at };
}
