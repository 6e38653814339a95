import type { AuditEvent, ReadableAuditSink } from "@tessera/core";
import {
  type AuditFilter,
  checkAuditFilter,
  parseAuditEvent,
  storageDigest,
} from "@tessera/core/store-kit";
import type { Database } from "./database.js";

/**
 * Append-only audit: rows are inserted, never updated or deleted by Tessera. `seq` gives the
 * append order; call and trace IDs are indexed by digest so `explain` reads one call's
 * events without scanning the trail.
 */
export class PostgresAuditSink implements ReadableAuditSink {
  readonly #db: Database;
  readonly #table: string;

  constructor(db: Database) {
    this.#db = db;
    this.#table = db.table("audit");
  }

  async append(event: AuditEvent): Promise<void> {
    const valid = parseAuditEvent(event);
    await this.#db.query(
      "audit_unavailable",
      `INSERT INTO ${this.#table} (call_key, trace_key, event) VALUES ($1, $2, $3)`,
      [storageDigest(valid.callId), storageDigest(valid.traceId), JSON.stringify(valid)],
    );
  }

  async read(filter: AuditFilter = {}): Promise<readonly AuditEvent[]> {
    checkAuditFilter(filter);
    const where: string[] = [];
    const values: unknown[] = [];
    if (filter.callId !== undefined) {
      values.push(storageDigest(filter.callId));
      where.push(`call_key = $${values.length}`);
    }
    if (filter.traceId !== undefined) {
      values.push(storageDigest(filter.traceId));
      where.push(`trace_key = $${values.length}`);
    }
    let limit = "";
    if (filter.limit !== undefined) {
      values.push(filter.limit);
      limit = ` LIMIT $${values.length}`;
    }
    const clause = where.length > 0 ? ` WHERE ${where.join(" AND ")}` : "";
    const { rows } = await this.#db.query<{ event: string }>(
      "audit_unavailable",
      `SELECT event FROM ${this.#table}${clause} ORDER BY seq${limit}`,
      values,
    );
    return rows.map((row) => JSON.parse(row.event) as AuditEvent);
  }
}
