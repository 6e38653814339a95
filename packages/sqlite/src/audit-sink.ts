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
/** Moves the head only if it is still the one this process last wrote or read. */
const ADVANCE_HEAD =
  "UPDATE tessera_audit_heads SET seq = ?, hash = ? WHERE stream = ? AND seq = ? AND hash = ?";
type Linked = ReturnType<typeof linkAuditEvent>;

/** Streams whose heads this connection remembers at most (cleared wholesale when full). */
const KNOWN_HEADS = 4096;

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
 *
 * The connection remembers the head it last wrote or read per stream and links to it
 * without reading: one compare-and-move (`UPDATE … WHERE seq = ? AND hash = ?`) then the
 * insert. When the compare misses (another process wrote, a batch rolled back, a new
 * stream), it reads the head under the same lock and links to that. A remembered head can
 * be wrong but never trusted: the compare runs under the write lock.
 * Rows written before the chain (schema version 1) are kept as they were: they read back
 * without chain fields, the unchained start of their stream.
 */
export class SqliteAuditSink implements ReadableAuditSink {
  readonly #db: SqliteDatabase;
  /** The head each stream had after this connection's last write or read of it. */
  readonly #heads = new Map<string, ChainHead>();

  constructor(db: SqliteDatabase) {
    this.#db = db;
  }

  async append(event: AuditEvent): Promise<void> {
    const valid = parseAuditEvent(event);
    const stream = auditStreamOf(valid);
    // Move head and insert: one step under the write lock. A write alone runs as autocommit
    // statements (group-commit.ts), so it takes a transaction of its own here. Inside a
    // batch's BEGIN IMMEDIATE it needs none: nothing after the first write throws anything
    // but a driver error, which rolls the whole batch back (group-commit.ts).
    await this.#db.write(CODE, () => {
      if (this.#db.inTransaction) this.#link(stream, valid);
      else this.#db.immediate(() => this.#link(stream, valid));
    });
  }

  /** Links `event` after the stream's head, moves the head and inserts it; under the write lock. */
  #link(stream: string, event: AuditEvent): void {
    const linked = this.#linkToKnown(stream, event) ?? this.#linkToStored(stream, event);
    this.#db.statement(INSERT).run(event.callId, event.traceId, JSON.stringify(linked));
    // Remembered before COMMIT: if the batch rolls back, the next compare misses and reads.
    if (this.#heads.size >= KNOWN_HEADS && !this.#heads.has(stream)) this.#heads.clear();
    this.#heads.set(stream, { seq: linked.seq, hash: linked.hash });
  }

  /** Linked after the remembered head, when the stored head is still that one (now moved). */
  #linkToKnown(stream: string, event: AuditEvent): Linked | undefined {
    const known = this.#heads.get(stream);
    if (known === undefined) return undefined;
    const linked = linkAuditEvent(event, known);
    const { changes } = this.#db
      .statement(ADVANCE_HEAD)
      .run(linked.seq, linked.hash, stream, known.seq, known.hash);
    return changes === 1 ? linked : undefined;
  }

  /** Linked after the head as stored, which it then replaces (or creates, for a new stream). */
  #linkToStored(stream: string, event: AuditEvent): Linked {
    const head = (this.#db.statement(HEAD).get(stream) as ChainHead | undefined) ?? EMPTY_HEAD;
    const linked = linkAuditEvent(event, head);
    this.#db.statement(MOVE_HEAD).run(stream, linked.seq, linked.hash);
    return linked;
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
