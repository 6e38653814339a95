import type { AuditEvent, ReadableAuditSink } from "@tessera/core";
import {
  type AuditFilter,
  auditStreamOf,
  type ChainHead,
  checkAuditFilter,
  EMPTY_HEAD,
  linkAuditEvent,
  parseAuditEvent,
} from "@tessera/core/store-kit";
import type { SqliteDatabase } from "./database.js";

const CODE = "audit_unavailable";

const HEAD = "SELECT seq, hash FROM tessera_audit_heads WHERE stream = ?";
const INSERT = "INSERT INTO tessera_audit (call_id, trace_id, event) VALUES (?, ?, ?)";
const MOVE_HEAD = `INSERT INTO tessera_audit_heads (stream, seq, hash) VALUES (?, ?, ?)
  ON CONFLICT (stream) DO UPDATE SET seq = excluded.seq, hash = excluded.hash`;

/**
 * Append-only audit, a hash chain per stream (see core's `audit/chain.ts`): one row per event
 * in a sequence; triggers refuse UPDATE and DELETE, so even a host holding the file through
 * SQL cannot rewrite history without dropping them, and if it does, the chain shows it.
 *
 * Each stream's head lives in `tessera_audit_heads`, read and moved in the same BEGIN
 * IMMEDIATE as the insert (a group commit shared with the connection's other writes of the
 * tick, run one after another): the write lock spans processes, so writers in any number of
 * processes link one chain. The head is kept apart from the trail rather than read from the
 * stream's last row so that a deleted last event shows as soon as the next one is linked.
 * Rows written before the chain (schema version 1) are kept as they were: they read back
 * without chain fields, the unchained start of their stream.
 */
export class SqliteAuditSink implements ReadableAuditSink {
  readonly #db: SqliteDatabase;

  constructor(db: SqliteDatabase) {
    this.#db = db;
  }

  async append(event: AuditEvent): Promise<void> {
    const valid = parseAuditEvent(event);
    const stream = auditStreamOf(valid);
    // Read head, insert, move head: one step under the write lock. A write alone runs as
    // autocommit statements (group-commit.ts), so the three need their own transaction there;
    // inside a batch's BEGIN IMMEDIATE, better-sqlite3 nests it as a savepoint.
    await this.#db.write(CODE, () =>
      this.#db.immediate(() => {
        const head = (this.#db.statement(HEAD).get(stream) as ChainHead | undefined) ?? EMPTY_HEAD;
        const linked = linkAuditEvent(valid, head);
        this.#db.statement(INSERT).run(valid.callId, valid.traceId, JSON.stringify(linked));
        this.#db.statement(MOVE_HEAD).run(stream, linked.seq, linked.hash);
      }),
    );
  }

  /** Events in append order; with `limit`, the first `limit` of them (as every Tessera sink). */
  async read(filter: AuditFilter = {}): Promise<readonly AuditEvent[]> {
    checkAuditFilter(filter);
    const where: string[] = [];
    const params: (string | number)[] = [];
    if (filter.callId !== undefined) {
      where.push("call_id = ?");
      params.push(filter.callId);
    }
    if (filter.traceId !== undefined) {
      where.push("trace_id = ?");
      params.push(filter.traceId);
    }
    const condition = where.length > 0 ? `WHERE ${where.join(" AND ")}` : "";
    let sql = `SELECT event FROM tessera_audit ${condition} ORDER BY seq`;
    if (filter.limit !== undefined) {
      sql += " LIMIT ?";
      params.push(filter.limit);
    }
    const rows = this.#db.run(
      CODE,
      () => this.#db.statement(sql).all(...params) as { event: string }[],
    );
    return rows.map((row) => JSON.parse(row.event) as AuditEvent);
  }
}
