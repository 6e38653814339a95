import type { AuditEvent, AuditSink, ReadableAuditSink } from "@tessera/core";
import {
  type AuditFilter,
  type AuditPageOptions,
  checkAuditFilter,
  checkPageSize,
  misindexedAuditEvent,
  parseAuditEvent,
  parseStoredAuditEvent,
} from "@tessera/core/store-kit";
import { type AuditChainWriter, chainOf } from "./audit-link.js";
import type { SqliteDatabase } from "./database.js";

const CODE = "audit_unavailable";

/**
 * Append-only audit, a hash chain per stream (see core's `audit/chain.ts`): one row per event
 * in a sequence; triggers refuse UPDATE and DELETE, so even a host holding the file through
 * SQL cannot rewrite history without dropping them, and if it does, the chain shows it.
 *
 * Each event is linked and inserted under the write lock by the connection's chain writer
 * (`audit-link.ts`), which the act ledger shares, so both link one chain per stream.
 * Rows written before the chain (schema version 1) are kept as they were: they read back
 * without chain fields, the unchained start of their stream.
 */
export class SqliteAuditSink implements ReadableAuditSink {
  readonly #db: SqliteDatabase;
  readonly #chain: AuditChainWriter;

  constructor(db: SqliteDatabase) {
    this.#db = db;
    this.#chain = chainOf(db);
  }

  /**
   * With `unflushed` (a denial's event after its reply), a batch of such events alone commits
   * without its fsync, as a claim receipt does (`group-commit.ts`): durable against a crash
   * of the process at once, synced to disk within `UNFLUSHED_BOUND_MS` (`wal-sync.ts`). While
   * that sync fails, they take their fsync again.
   */
  async append(event: AuditEvent, options?: Parameters<AuditSink["append"]>[1]): Promise<void> {
    const valid = parseAuditEvent(event);
    const flush = options?.unflushed !== true || this.#db.walSync?.failing === true;
    // Move head and insert: one step under the write lock. A write alone runs as autocommit
    // statements (group-commit.ts), so it takes a transaction of its own here. Inside a
    // batch's BEGIN IMMEDIATE it needs none: nothing after the first write throws anything
    // but a driver error, which rolls the whole batch back (group-commit.ts).
    await this.#db.write(
      CODE,
      () => {
        if (this.#db.inTransaction) this.#chain.append(valid);
        else this.#db.batch(() => this.#chain.append(valid));
      },
      flush,
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
    // The newest `limit` are read backwards along the key and turned back to append order.
    const newest = filter.newest === true && filter.limit !== undefined;
    let sql = `SELECT event FROM tessera_audit ${condition} ORDER BY seq${newest ? " DESC" : ""}`;
    if (filter.limit !== undefined) {
      sql += " LIMIT ?";
      params.push(filter.limit);
    }
    const rows = this.#db.run(
      CODE,
      () => this.#db.statement(sql).all(...params) as { event: string }[],
    );
    if (newest) rows.reverse();
    // A row replaced by text that is not an event is named by its position, not a crash.
    const events = rows.map((row, position) => parseStoredAuditEvent(row.event, position));
    // The columns only find candidates: an event is one call's or trace's by its own hashed
    // fields, so a row whose column was edited is never shown under another call's ID.
    // (`audit verify` reports such a row: `readPages`.)
    return where.length === 0
      ? events
      : events.filter(
          (event) =>
            (filter.callId === undefined || event.callId === filter.callId) &&
            (filter.traceId === undefined || event.traceId === filter.traceId),
        );
  }

  /**
   * Pages along the key up to the last row when reading began. A row is numbered when its
   * writer holds the database's one write lock and visible only once committed, so no row
   * with a lower number can appear after a higher one was read: the pages skip nothing.
   *
   * Each row's `call_id` and `trace_id` are read with its event and must be the event's own:
   * the hash chain covers only the event's text, and a column edited beside it would hide the
   * event from reads by ID (`explain`) while the chain still verified.
   */
  async *readPages(options?: AuditPageOptions): AsyncGenerator<readonly AuditEvent[]> {
    const pageSize = checkPageSize(options);
    const read = <T>(sql: string, ...params: number[]) =>
      this.#db.run(CODE, () => this.#db.statement(sql).all(...params) as T[]);
    const last = read<{ last: number | null }>("SELECT max(seq) AS last FROM tessera_audit")[0]
      ?.last;
    let after = 0;
    let position = 0;
    while (last !== null && last !== undefined && after < last) {
      const rows = read<{ seq: number; call_id: string; trace_id: string; event: string }>(
        `SELECT seq, call_id, trace_id, event FROM tessera_audit
         WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?`,
        after,
        last,
        pageSize,
      );
      if (rows.length === 0) return;
      after = (rows[rows.length - 1] as { seq: number }).seq;
      yield rows.map((row) => {
        const at = position++;
        const event = parseStoredAuditEvent(row.event, at);
        if (row.call_id !== asReadBack(event.callId)) {
          throw misindexedAuditEvent(event, at, "call ID");
        }
        if (row.trace_id !== asReadBack(event.traceId)) {
          throw misindexedAuditEvent(event, at, "trace ID");
        }
        return event;
      });
    }
  }
}

/**
 * An ID as its index column reads back. A trail written before IDs with a lone surrogate were
 * refused may hold one: the driver wrote its three bytes as they are (ED A0 80 for U+D800),
 * which read back as three U+FFFD, while the event's JSON kept it escaped and whole.
 */
function asReadBack(id: string): string {
  return id.isWellFormed() ? id : id.replace(/\p{Cs}/gu, "\ufffd\ufffd\ufffd");
}
