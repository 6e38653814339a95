import type { AuditEvent } from "@tessera/core";
import {
  auditContentDigest,
  auditLinkHash,
  auditStreamOf,
  type ChainHead,
  type ChainLink,
  EMPTY_HEAD,
} from "@tessera/core/store-kit";
import type { SqliteDatabase } from "./database.js";

const HEAD = "SELECT seq, hash FROM tessera_audit_heads WHERE stream = ?";
const INSERT = "INSERT INTO tessera_audit (call_id, trace_id, event) VALUES (?, ?, ?)";
const MOVE_HEAD = `INSERT INTO tessera_audit_heads (stream, seq, hash) VALUES (?, ?, ?)
  ON CONFLICT (stream) DO UPDATE SET seq = excluded.seq, hash = excluded.hash`;
/** Moves the head only if it is still the one this connection last wrote or read. */
const ADVANCE_HEAD =
  "UPDATE tessera_audit_heads SET seq = ?, hash = ? WHERE stream = ? AND seq = ? AND hash = ?";

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
 *
 * The link is core's `linkAuditEvent`, taken apart so that the content's digest (its
 * canonical JSON and a SHA-256) is computed once per event even when the compare misses and
 * the event is linked a second time, after the stored head; the row's text is the same.
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
    // Any chain fields the writer passed are replaced: only the sink links.
    const { seq: _seq, prev: _prev, hash: _hash, ...content } = event;
    const digest = auditContentDigest(content as AuditEvent);
    const link = this.#linkToKnown(stream, digest) ?? this.#linkToStored(stream, digest);
    const linked = Object.assign(content, { seq: link.seq, prev: link.prev, hash: link.hash });
    this.#db.statement(INSERT).run(event.callId, event.traceId, JSON.stringify(linked));
    // Remembered before COMMIT: if the batch rolls back, the next compare misses and reads.
    if (this.#heads.size >= KNOWN_HEADS && !this.#heads.has(stream)) this.#heads.clear();
    this.#heads.set(stream, { seq: link.seq, hash: link.hash });
  }

  /** The link after the remembered head, when the stored head is still that one (now moved). */
  #linkToKnown(stream: string, digest: string): ChainLink | undefined {
    const known = this.#heads.get(stream);
    if (known === undefined) return undefined;
    const link = linkAfter(known, digest);
    const { changes } = this.#db
      .statement(ADVANCE_HEAD)
      .run(link.seq, link.hash, stream, known.seq, known.hash);
    return changes === 1 ? link : undefined;
  }

  /** The link after the head as stored, which it then replaces (or creates, for a new stream). */
  #linkToStored(stream: string, digest: string): ChainLink {
    const head = (this.#db.statement(HEAD).get(stream) as ChainHead | undefined) ?? EMPTY_HEAD;
    const link = linkAfter(head, digest);
    this.#db.statement(MOVE_HEAD).run(stream, link.seq, link.hash);
    return link;
  }
}

/** What `linkAuditEvent` adds after `head`, from the content's digest. */
function linkAfter(head: ChainHead, digest: string): ChainLink {
  const seq = head.seq + 1;
  return { seq, prev: head.hash, hash: auditLinkHash(seq, head.hash, digest) };
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
