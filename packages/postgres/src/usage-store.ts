import type { ConsumeResult, GrantUsageStore, ReleaseResult } from "@tessera/core";
import { checkCarve, checkId, checkMaxUses, storageDigest } from "@tessera/core/store-kit";
import { Batcher, groupBy, type Outcome, retryDeadlock } from "./batcher.js";
import type { Database } from "./database.js";

const CODE = "usage_store_unavailable";

interface ConsumeRequest {
  readonly key: string;
  readonly ids: string;
  readonly count: number;
  readonly maxUses: number;
  /** `tryConsume` (one use, may create the row) or `tryConsumeMany` (a carve). */
  readonly many: boolean;
}

/**
 * Bounded usage in one row per (namespace, grant). The decision is one conditional
 * `UPDATE … SET used = used + 1 WHERE key = $1 AND used < $2`: PostgreSQL takes the row lock
 * and re-checks the guard on the latest row version, so racing callers across any number of
 * processes get exactly `max` successes, with no read-then-write in between. When the
 * update matches nothing and the row is not already at its bound (it does not exist yet),
 * the same guarded increment is retried as one `INSERT … ON CONFLICT DO UPDATE … WHERE used
 * < max`, which also creates the row; it is atomic on its own, so first uses racing from
 * many callers still count exactly. In steady state a consume is the single UPDATE, the same
 * statement as the raw primitive. Consumes that arrive while others are in flight go
 * together, one grouped statement per batch (`batcher.ts`, `#consumeBatch`).
 */
export class PostgresUsageStore implements GrantUsageStore {
  readonly #db: Database;
  readonly #sql: Record<
    "consume" | "upsert" | "consumeMany" | "grouped" | "read" | "release",
    string
  >;
  readonly #batches = new Batcher<ConsumeRequest, ConsumeResult>((batch) =>
    this.#consumeBatch(batch),
  );

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
      // Each key once, with the sum its callers ask for: all of them fit, or the row is left
      // alone and its callers are answered one by one (see #consumeBatch).
      grouped: `UPDATE ${usage} AS u SET used = u.used + r.want
        FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS r(key, want, max)
        WHERE u.key = r.key AND u.used + r.want <= r.max RETURNING u.key, u.used`,
      read: `SELECT used FROM ${usage} WHERE key = $1`,
      // One use back under the row lock, never below zero.
      release: `UPDATE ${usage} SET used = used - 1 WHERE key = $1 AND used > 0 RETURNING used`,
    };
  }

  async getUsage(namespaceId: string, grantId: string): Promise<number> {
    checkId(namespaceId, "namespaceId");
    checkId(grantId, "grantId");
    return this.#read(storageDigest(namespaceId, grantId));
  }

  /** Not `async`: the batch's own promise is returned, without a second one to adopt it. */
  tryConsume(namespaceId: string, grantId: string, maxUses: number): Promise<ConsumeResult> {
    try {
      checkId(namespaceId, "namespaceId");
      checkId(grantId, "grantId");
      // A positive bound: the upsert inserts a first use outright.
      checkMaxUses(maxUses);
    } catch (error) {
      return Promise.reject(error);
    }
    const key = storageDigest(namespaceId, grantId);
    const ids = JSON.stringify([namespaceId, grantId]);
    return this.#batches.submit({ key, ids, count: 1, maxUses, many: false });
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
    return this.#batches.submit({ key, ids, count, maxUses, many: true });
  }

  /**
   * One batch of consumes. Grouped by key in arrival order: one `UPDATE … FROM unnest(…)`
   * adds each key's total where all of it fits under the bound (the common case: a ticket
   * used once, or a budget far from its end), and each caller of such a key is handed its
   * own count in arrival order. A key whose total does not fit, whose row does not exist
   * yet, or whose callers disagree on the bound is left untouched by that statement, and
   * its callers are then answered one after another with the single-row statements: so the
   * last use goes to the earliest caller, exactly one, and a refused caller spends nothing.
   */
  async release(namespaceId: string, grantId: string): Promise<ReleaseResult> {
    checkId(namespaceId, "namespaceId");
    checkId(grantId, "grantId");
    const key = storageDigest(namespaceId, grantId);
    const used = await this.#consume(this.#sql.release, [key]);
    if (used !== undefined) return { released: true, used };
    return { released: false, used: await this.#read(key) };
  }

  async #consumeBatch(batch: readonly ConsumeRequest[]): Promise<Outcome<ConsumeResult>[]> {
    const outcomes: Outcome<ConsumeResult>[] = new Array(batch.length);
    const groups = groupBy(batch, (request) => request.key);
    const fits = [...groups.entries()]
      .filter(([, members]) => {
        const first = batch[members[0] as number] as ConsumeRequest;
        const total = members.reduce((sum, i) => sum + (batch[i] as ConsumeRequest).count, 0);
        return (
          members.every((i) => (batch[i] as ConsumeRequest).maxUses === first.maxUses) &&
          total <= first.maxUses
        );
      })
      .map(([key]) => key)
      .sort();
    const after = new Map<string, number>();
    if (batch.length > 1 && fits.length > 0) {
      const wants = fits.map((key) =>
        (groups.get(key) as number[]).reduce(
          (sum, i) => sum + (batch[i] as ConsumeRequest).count,
          0,
        ),
      );
      const maxes = fits.map(
        (key) => (batch[(groups.get(key) as number[])[0] as number] as ConsumeRequest).maxUses,
      );
      const { rows } = await retryDeadlock(() =>
        this.#db.query<{ key: string; used: string }>(CODE, this.#sql.grouped, [
          fits,
          wants,
          maxes,
        ]),
      );
      for (const row of rows) after.set(row.key, Number(row.used));
    }
    const rest: number[][] = [];
    for (const [key, members] of groups) {
      const used = after.get(key);
      if (used === undefined) {
        rest.push(members);
        continue;
      }
      let running = used - members.reduce((sum, i) => sum + (batch[i] as ConsumeRequest).count, 0);
      for (const i of members) {
        running += (batch[i] as ConsumeRequest).count;
        outcomes[i] = { ok: true, value: { consumed: true, used: running } };
      }
    }
    // Keys in parallel, each key's callers in arrival order. A failure answers that caller
    // and the ones behind it on the same key; the grouped consumes above stand committed.
    await Promise.all(
      rest.map(async (members) => {
        for (const [n, i] of members.entries()) {
          try {
            outcomes[i] = { ok: true, value: await this.#consumeOne(batch[i] as ConsumeRequest) };
          } catch (error) {
            for (const j of members.slice(n)) outcomes[j] = { ok: false, error };
            return;
          }
        }
      }),
    );
    return outcomes;
  }

  /** One caller alone, with the single-row statements. */
  async #consumeOne(request: ConsumeRequest): Promise<ConsumeResult> {
    const { key, ids, count, maxUses } = request;
    if (request.many) {
      const used = await this.#consume(this.#sql.consumeMany, [key, maxUses, count, ids]);
      if (used !== undefined) return { consumed: true, used };
      return { consumed: false, used: await this.#read(key) };
    }
    const consumed = await this.#consume(this.#sql.consume, [key, maxUses]);
    if (consumed !== undefined) return { consumed: true, used: consumed };
    // Nothing matched: the bound is reached, or the counter row does not exist yet. A row read
    // now at or above the bound means a refusal (as of the UPDATE above, which decided; a
    // release since then may lower the count, and the next consume sees it); this read only
    // reports it. Below the bound (a use given back meanwhile), the upsert decides.
    const current = await this.#readRow(key);
    if (current !== undefined && current >= maxUses) return { consumed: false, used: current };
    const upserted = await this.#consume(this.#sql.upsert, [key, maxUses, ids]);
    if (upserted !== undefined) return { consumed: true, used: upserted };
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
