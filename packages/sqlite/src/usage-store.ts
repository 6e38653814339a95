import type { ConsumeResult, GrantUsageStore, ReleaseResult } from "@tessera/core";
import { checkCarve, checkId, checkMaxUses } from "@tessera/core/store-kit";
import { cacheKey, type SqliteDatabase } from "./database.js";

const CODE = "usage_store_unavailable";

/**
 * Bounded usage, one row per (namespace, grant). `tryConsume` is one statement: an insert of
 * the counter at 1 that, when the row exists, becomes an update guarded by `used < max`.
 * SQLite runs a statement under the database write lock, so racing callers in any number of
 * processes get exactly `max` successes; nothing is read before it is written. Consumes
 * issued together share one commit (`group-commit.ts`), each still its own statement.
 */
export class SqliteUsageStore implements GrantUsageStore {
  readonly #db: SqliteDatabase;

  constructor(db: SqliteDatabase) {
    this.#db = db;
  }

  /**
   * What discovery reads on every denied call of a bounded ticket's holder: its file check
   * may be a millisecond old (`versionRead`, database.ts), and no `async` frame wraps it.
   * Only informs: every spend is decided by the guarded statement under the write lock.
   */
  getUsage(namespaceId: string, grantId: string): Promise<number> {
    try {
      checkId(namespaceId, "namespaceId");
      checkId(grantId, "grantId");
      return Promise.resolve(
        this.#db.cachedRead(CODE, cacheKey("usage", namespaceId, grantId), () =>
          usedOf(this.#db, namespaceId, grantId),
        ),
      );
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Shares its commit with the other writes issued in the same tick (`group-commit.ts`).
   * Not `async`: the queue's own promise is returned as it is, without a second one to
   * adopt it (two microtask hops per call, measurable at c=1).
   */
  tryConsume(namespaceId: string, grantId: string, maxUses: number): Promise<ConsumeResult> {
    try {
      checkId(namespaceId, "namespaceId");
      checkId(grantId, "grantId");
      checkMaxUses(maxUses);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#db.write(CODE, () => consumeRow(this.#db, namespaceId, grantId, maxUses));
  }

  async tryConsumeMany(
    namespaceId: string,
    grantId: string,
    count: number,
    maxUses: number,
  ): Promise<ConsumeResult> {
    checkCarve(namespaceId, grantId, count, maxUses);
    // More than the bound can never fit; the insert below would otherwise create the row at it.
    if (count > maxUses) return { consumed: false, used: this.readUsage(namespaceId, grantId) };
    return this.#db.write(CODE, () => {
      // One statement, like consume(): the guard `used + count <= max` and the add are one
      // step under the write lock, so a carve is all of its uses or none of them.
      const [row] = this.#db
        .statement(
          `INSERT INTO tessera_usage (namespace_id, grant_id, used) VALUES (?, ?, ?)
           ON CONFLICT (namespace_id, grant_id) DO UPDATE SET used = used + excluded.used
           WHERE used + excluded.used <= ?
           RETURNING used`,
        )
        .all(namespaceId, grantId, count, maxUses) as { used: number }[];
      if (row) return { consumed: true, used: row.used };
      return { consumed: false, used: usedOf(this.#db, namespaceId, grantId) };
    });
  }

  /** One use back, never below zero: one guarded statement, sharing a commit like a consume. */
  release(namespaceId: string, grantId: string): Promise<ReleaseResult> {
    try {
      checkId(namespaceId, "namespaceId");
      checkId(grantId, "grantId");
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#db.write(CODE, () => releaseRow(this.#db, namespaceId, grantId));
  }

  /** Synchronous core, also used by the self-test inside a rolled-back transaction. */
  consume(namespaceId: string, grantId: string, maxUses: number): ConsumeResult {
    checkId(namespaceId, "namespaceId");
    checkId(grantId, "grantId");
    checkMaxUses(maxUses);
    return this.#db.run(CODE, () => consumeRow(this.#db, namespaceId, grantId, maxUses));
  }

  readUsage(namespaceId: string, grantId: string): number {
    checkId(namespaceId, "namespaceId");
    checkId(grantId, "grantId");
    return this.#db.run(CODE, () => usedOf(this.#db, namespaceId, grantId));
  }
}

/** One guarded consume: the insert of a first use, or the add while `used < max`. */
const CONSUME = `INSERT INTO tessera_usage (namespace_id, grant_id, used) VALUES (?, ?, 1)
  ON CONFLICT (namespace_id, grant_id) DO UPDATE SET used = used + 1
  WHERE used < ? AND tessera_note(used + 1)`;

/**
 * Spends one use of a bounded grant under the caller's write lock (its own autocommit
 * statement, a batch, or an act's transaction). Shared by the usage store and the act ledger.
 */
export function consumeRow(
  db: SqliteDatabase,
  namespaceId: string,
  grantId: string,
  maxUses: number,
): ConsumeResult {
  // One statement: the insert of a first use, or the guarded add. The new count comes back
  // through tessera_note() (database.ts), called by the guard only on the row it lets
  // through; an insert does not call it, and its count is 1. `changes` says which way it
  // went. Run to its end (`run()`, never a reset midway): its errors surface and SQLite
  // runs its WAL auto-checkpoint after the commit (see docs/stores.md on `get()`).
  db.noted = 1;
  if (db.statement(CONSUME).run(namespaceId, grantId, maxUses).changes === 1) {
    return { consumed: true, used: db.noted };
  }
  // Refused by the guard. This read only reports the count: the statement above decided.
  return { consumed: false, used: usedOf(db, namespaceId, grantId) };
}

/**
 * Gives one use back, never below zero, under the caller's write lock: one guarded statement.
 * Shared by the usage store's `release` and the act ledger's `withdraw`.
 */
export function releaseRow(
  db: SqliteDatabase,
  namespaceId: string,
  grantId: string,
): ReleaseResult {
  const [row] = db
    .statement(
      `UPDATE tessera_usage SET used = used - 1
       WHERE namespace_id = ? AND grant_id = ? AND used > 0 RETURNING used`,
    )
    .all(namespaceId, grantId) as { used: number }[];
  if (row) return { released: true, used: row.used };
  return { released: false, used: usedOf(db, namespaceId, grantId) };
}

function usedOf(db: SqliteDatabase, namespaceId: string, grantId: string): number {
  const row = db
    .statement("SELECT used FROM tessera_usage WHERE namespace_id = ? AND grant_id = ?")
    .get(namespaceId, grantId) as { used: number } | undefined;
  return row?.used ?? 0;
}
