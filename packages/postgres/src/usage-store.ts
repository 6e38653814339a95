import type { ConsumeResult, GrantUsageStore } from "@tessera/core";
import { checkCarve, checkId, checkMaxUses, storageDigest } from "@tessera/core/store-kit";
import type { Database } from "./database.js";

/**
 * Bounded usage in one row per (namespace, grant). The decision is one conditional
 * `UPDATE … SET used = used + 1 WHERE key = $1 AND used < $2`: PostgreSQL takes the row lock
 * and re-checks the guard on the latest row version, so racing callers across any number of
 * processes get exactly `max` successes, with no read-then-write in between. When the
 * update matches nothing and the row is not already at its bound (it does not exist yet),
 * the same guarded increment is retried as one `INSERT … ON CONFLICT DO UPDATE … WHERE used
 * < max`, which also creates the row; it is atomic on its own, so first uses racing from
 * many callers still count exactly. In steady state a consume is the single UPDATE, the same
 * statement as the raw primitive.
 */
export class PostgresUsageStore implements GrantUsageStore {
  readonly #db: Database;
  readonly #sql: Record<"consume" | "upsert" | "consumeMany" | "read", string>;

  constructor(db: Database) {
    this.#db = db;
    const usage = db.table("usage");
    this.#sql = {
      consume: `UPDATE ${usage} SET used = used + 1 WHERE key = $1 AND used < $2 RETURNING used`,
      upsert: `INSERT INTO ${usage} AS u (key, ids, used) VALUES ($1, $3, 1)
        ON CONFLICT (key) DO UPDATE SET used = u.used + 1 WHERE u.used < $2
        RETURNING used`,
      // One statement: the guard and the add happen under the row lock, all uses or none.
      consumeMany: `INSERT INTO ${usage} AS u (key, ids, used) VALUES ($1, $4, $3)
        ON CONFLICT (key) DO UPDATE SET used = u.used + $3 WHERE u.used + $3 <= $2
        RETURNING used`,
      read: `SELECT used FROM ${usage} WHERE key = $1`,
    };
  }

  async getUsage(namespaceId: string, grantId: string): Promise<number> {
    checkId(namespaceId, "namespaceId");
    checkId(grantId, "grantId");
    return this.#read(storageDigest(namespaceId, grantId));
  }

  async tryConsume(namespaceId: string, grantId: string, maxUses: number): Promise<ConsumeResult> {
    checkId(namespaceId, "namespaceId");
    checkId(grantId, "grantId");
    // A positive bound: the upsert below inserts a first use outright.
    checkMaxUses(maxUses);
    const key = storageDigest(namespaceId, grantId);
    const consumed = await this.#consume(this.#sql.consume, [key, maxUses]);
    if (consumed !== undefined) return { consumed: true, used: consumed };
    // Nothing matched: the bound is reached, or the counter row does not exist yet. Counts
    // never go down, so a row read now at or above the bound means a refusal; this read only
    // reports it, the decision was the guarded UPDATE above.
    const current = await this.#readRow(key);
    if (current !== undefined && current >= maxUses) return { consumed: false, used: current };
    const ids = JSON.stringify([namespaceId, grantId]);
    const upserted = await this.#consume(this.#sql.upsert, [key, maxUses, ids]);
    if (upserted !== undefined) return { consumed: true, used: upserted };
    return { consumed: false, used: await this.#read(key) };
  }

  async tryConsumeMany(
    namespaceId: string,
    grantId: string,
    count: number,
    maxUses: number,
  ): Promise<ConsumeResult> {
    checkCarve(namespaceId, grantId, count, maxUses);
    const key = storageDigest(namespaceId, grantId);
    // More than the bound never fits; the insert would otherwise create the row past it.
    if (count > maxUses) return { consumed: false, used: await this.#read(key) };
    const ids = JSON.stringify([namespaceId, grantId]);
    const used = await this.#consume(this.#sql.consumeMany, [key, maxUses, count, ids]);
    if (used !== undefined) return { consumed: true, used };
    return { consumed: false, used: await this.#read(key) };
  }

  async #consume(sql: string, values: unknown[]): Promise<number | undefined> {
    const { rows } = await this.#db.query<{ used: string }>("usage_store_unavailable", sql, values);
    return rows[0] ? Number(rows[0].used) : undefined;
  }

  async #read(key: string): Promise<number> {
    return (await this.#readRow(key)) ?? 0;
  }

  async #readRow(key: string): Promise<number | undefined> {
    const { rows } = await this.#db.query<{ used: string }>(
      "usage_store_unavailable",
      this.#sql.read,
      [key],
    );
    return rows[0] ? Number(rows[0].used) : undefined;
  }
}
