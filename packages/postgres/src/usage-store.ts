import { type ConsumeResult, type GrantUsageStore, TesseraError } from "@tessera/core";
import type { Database } from "./database.js";
import { digest } from "./digest.js";

/**
 * Bounded usage in one row per (namespace, grant). `tryConsume` is a single statement: an
 * insert of the counter row that, on conflict, becomes an update guarded by `used < max`.
 * PostgreSQL takes the row lock for the conflicting update and re-checks the guard on the
 * latest version, so racing callers across any number of processes get exactly `max`
 * successes, with no read-then-write in between.
 */
export class PostgresUsageStore implements GrantUsageStore {
  readonly #db: Database;
  readonly #consumeSql: string;
  readonly #readSql: string;

  constructor(db: Database) {
    this.#db = db;
    const usage = db.table("usage");
    this.#consumeSql = `INSERT INTO ${usage} AS u (key, ids, used) VALUES ($1, $2, 1)
      ON CONFLICT (key) DO UPDATE SET used = u.used + 1 WHERE u.used < $3
      RETURNING used`;
    this.#readSql = `SELECT used FROM ${usage} WHERE key = $1`;
  }

  async getUsage(namespaceId: string, grantId: string): Promise<number> {
    checkIds(namespaceId, grantId);
    const { rows } = await this.#db.query<{ used: string }>(
      "usage_store_unavailable",
      this.#readSql,
      [digest(namespaceId, grantId)],
    );
    return rows[0] ? Number(rows[0].used) : 0;
  }

  async tryConsume(namespaceId: string, grantId: string, maxUses: number): Promise<ConsumeResult> {
    checkIds(namespaceId, grantId);
    if (!Number.isSafeInteger(maxUses) || maxUses < 0) {
      throw new TesseraError("invalid_input", "maxUses must be a non-negative integer");
    }
    const key = digest(namespaceId, grantId);
    if (maxUses === 0) return { consumed: false, used: await this.getUsage(namespaceId, grantId) };
    const { rows } = await this.#db.query<{ used: string }>(
      "usage_store_unavailable",
      this.#consumeSql,
      [key, JSON.stringify([namespaceId, grantId]), maxUses],
    );
    if (rows[0]) return { consumed: true, used: Number(rows[0].used) };
    // Refused by the guard. This read only reports the count; the decision was already taken
    // by the statement above, atomically.
    return { consumed: false, used: await this.getUsage(namespaceId, grantId) };
  }
}

function checkIds(namespaceId: string, grantId: string): void {
  if (typeof namespaceId !== "string" || typeof grantId !== "string") {
    throw new TesseraError("invalid_input", "namespaceId and grantId must be strings");
  }
}
