import type { AuditEvent, ReadableAuditSink } from "@tessera/core";
import { type AuditFilter, checkAuditFilter, parseAuditEvent } from "@tessera/core/store-kit";
import type { SqliteDatabase } from "./database.js";

const CODE = "audit_unavailable";

/**
 * Append-only audit: one row per event in a sequence; triggers refuse UPDATE and DELETE,
 * so even a host holding the file through SQL cannot rewrite history without dropping them.
 */
export class SqliteAuditSink implements ReadableAuditSink {
  readonly #db: SqliteDatabase;

  constructor(db: SqliteDatabase) {
    this.#db = db;
  }

  async append(event: AuditEvent): Promise<void> {
    const valid = parseAuditEvent(event);
    this.#db.run(CODE, () =>
      this.#db
        .statement("INSERT INTO tessera_audit (call_id, trace_id, event) VALUES (?, ?, ?)")
        .run(valid.callId, valid.traceId, JSON.stringify(valid)),
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
