import type { AuditEvent } from "@tessera/core";
import { auditStreamOf, type ChainHead, EMPTY_HEAD, linkAuditEvent } from "@tessera/core/store-kit";
import type { SqliteDatabase } from "./database.js";

const HEAD = "SELECT seq, hash FROM tessera_audit_heads WHERE stream = ?";
const INSERT = "INSERT INTO tessera_audit (call_id, trace_id, event) VALUES (?, ?, ?)";
const MOVE_HEAD = `INSERT INTO tessera_audit_heads (stream, seq, hash) VALUES (?, ?, ?)
  ON CONFLICT (stream) DO UPDATE SET seq = excluded.seq, hash = excluded.hash`;
/** Moves the head only if it is still the one this connection last wrote or read. */
const ADVANCE_HEAD =
  "UPDATE tessera_audit_heads SET seq = ?, hash = ? WHERE stream = ? AND seq = ? AND hash = ?";
type Linked = ReturnType<typeof linkAuditEvent>;

/** Streams whose heads a connection remembers at most (cleared wholesale when full). */
const KNOWN_HEADS = 4096;

/**
 * Links events into their stream's chain and inserts them, under the write lock the caller
 * holds (a BEGIN IMMEDIATE: the audit sink's append, or an act's transaction). One per
 * connection (`chainOf`), so the sink and the act ledger remember the same heads.
 *
 * Each stream's head lives in `tessera_audit_heads`, read and moved in the same transaction as
 * the insert: the write lock spans processes, so writers in any number of processes link one
 * chain. The head is kept apart from the trail rather than read from the stream's last row so
 * that a deleted last event shows as soon as the next one is linked.
 *
 * The connection remembers the head it last wrote or read per stream and links to it without
 * reading: one compare-and-move (`UPDATE … WHERE seq = ? AND hash = ?`) then the insert. When
 * the compare misses (another process wrote, a batch rolled back, a new stream), it reads the
 * head under the same lock and links to that. A remembered head can be wrong but never
 * trusted: the compare runs under the write lock.
 */
export class AuditChainWriter {
  readonly #db: SqliteDatabase;
  /** The head each stream had after this connection's last write or read of it. */
  readonly #heads = new Map<string, ChainHead>();

  constructor(db: SqliteDatabase) {
    this.#db = db;
  }

  /** Links `event` (already parsed) after its stream's head, moves the head and inserts it. */
  append(event: AuditEvent): void {
    const stream = auditStreamOf(event);
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
}

const writers = new WeakMap<SqliteDatabase, AuditChainWriter>();

/** The connection's chain writer, shared by every port over it. */
export function chainOf(db: SqliteDatabase): AuditChainWriter {
  let writer = writers.get(db);
  if (writer === undefined) {
    writer = new AuditChainWriter(db);
    writers.set(db, writer);
  }
  return writer;
}
