import { Batcher, groupBy, type Outcome } from "./batcher.js";
import type { Database } from "./database.js";

/** One holder's row in `grant_versions`, by digests. */
export interface VersionKey {
  readonly namespaceKey: string;
  readonly subjectKey: string;
}

interface VersionRow {
  readonly salt: string;
  readonly bumps: string;
}

/**
 * Grant-version reads, coalesced. Every turn the kernel opens starts with one of these, so
 * under load they were the most frequent statement; reads queued while earlier ones are in
 * flight now leave as one statement for all their distinct holders (`batcher.ts`).
 *
 * Why queue-then-send and never "join the read already on the wire": a revoke must be seen
 * by the next turn. A statement's snapshot is taken when the server starts it; a read already
 * sent when a caller asks may have started before a revoke that committed just before that
 * caller asked, and handing the caller its answer would let the revoked grant through one more
 * turn. Every batch here is sent after all of its callers asked, so its snapshot is at least
 * as new as each of them.
 */
export class VersionReads {
  readonly #db: Database;
  readonly #one: string;
  readonly #many: string;
  readonly #batches = new Batcher<VersionKey, string>((batch) => this.#read(batch));

  constructor(db: Database) {
    this.#db = db;
    const versions = db.table("grant_versions");
    this.#one = `SELECT salt, bumps FROM ${versions} WHERE namespace_key = $1 AND subject_key = $2`;
    // Each distinct holder once; a holder without a row is simply absent ("0").
    this.#many = `SELECT k.i, v.salt, v.bumps
      FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(n, s, i)
      JOIN ${versions} AS v ON v.namespace_key = k.n AND v.subject_key = k.s`;
  }

  /** The holder's version `salt.bumps`, or "0" for one that never held a grant. */
  read(key: VersionKey): Promise<string> {
    return this.#batches.submit(key);
  }

  async #read(batch: readonly VersionKey[]): Promise<Outcome<string>[]> {
    const groups = groupBy(batch, (key) => `${key.namespaceKey} ${key.subjectKey}`);
    const answers: string[] = new Array(groups.size).fill("0");
    if (groups.size === 1) {
      // A lone holder (the common case at low load) pays exactly the single-row statement.
      const { namespaceKey, subjectKey } = batch[0] as VersionKey;
      const { rows } = await this.#db.query<VersionRow>("grant_store_unavailable", this.#one, [
        namespaceKey,
        subjectKey,
      ]);
      const row = rows[0];
      if (row !== undefined) answers[0] = versionOf(row);
    } else {
      const firsts = [...groups.values()].map((members) => batch[members[0] as number]);
      const { rows } = await this.#db.query<VersionRow & { i: string }>(
        "grant_store_unavailable",
        this.#many,
        [firsts.map((key) => key?.namespaceKey), firsts.map((key) => key?.subjectKey)],
      );
      // Ordinality counts from 1.
      for (const row of rows) answers[Number(row.i) - 1] = versionOf(row);
    }
    const outcomes: Outcome<string>[] = new Array(batch.length);
    let g = 0;
    for (const members of groups.values()) {
      const value = answers[g++] as string;
      for (const i of members) outcomes[i] = { ok: true, value };
    }
    return outcomes;
  }
}

function versionOf(row: VersionRow): string {
  return `${row.salt}.${row.bumps}`;
}
