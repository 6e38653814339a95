import { type AuditEvent, type ReadableAuditSink, TesseraError } from "@tessera/core";
import {
  AuditAppendQueue,
  type AuditFilter,
  type AuditPageOptions,
  type ChainHead,
  checkAuditFilter,
  checkPageSize,
  GENESIS_HASH,
  linkAuditEvent,
  misindexedAuditEvent,
  parseStoredAuditEvent,
  storageDigest,
  uniqueStorageDigest,
} from "@tessera/core/store-kit";
import type pg from "pg";
import type { Database } from "./database.js";

const CODE = "audit_unavailable";
/** Events written by one statement at most: bounds the statement's size under a burst. */
const MAX_BATCH = 256;

/**
 * Append-only audit, a hash chain per stream (see core's `audit/chain.ts`). `seq` gives the
 * append order; call and trace IDs are indexed by digest so `explain` reads one call's
 * events without scanning the trail; triggers refuse UPDATE, DELETE and TRUNCATE.
 *
 * Each stream's head is a row of `audit_heads`, and an append is a compare-and-append: one
 * statement moves the head only if it is still the one the events were linked to, and
 * inserts the events only if it moved (row locks make the check and the move one step under
 * any number of connections and processes). This process remembers each stream's head and
 * sends one stream's appends one batch at a time, so a lone writer links and writes in one
 * round trip and never loses to itself. When the head it remembers is stale (another process
 * wrote) or unknown, it locks the head row in a transaction, reads it, links and writes, so
 * every append finishes in at most two tries.
 */
export class PostgresAuditSink implements ReadableAuditSink {
  readonly #db: Database;
  readonly #table: string;
  readonly #heads: string;
  // Unknown (undefined) at first and after a failed write, whose statement may have committed.
  readonly #queue = new AuditAppendQueue<ChainHead | undefined>({
    maxBatch: MAX_BATCH,
    startHead: undefined,
    write: (stream, head, events) => this.#write(storageDigest(stream), head, events),
  });

  constructor(db: Database) {
    this.#db = db;
    this.#table = db.table("audit");
    this.#heads = db.table("audit_heads");
  }

  append(event: AuditEvent): Promise<void> {
    return this.#queue.append(event);
  }

  /** Links `events` after the stream's head and writes them; returns the new head. */
  async #write(
    streamKey: string,
    known: ChainHead | undefined,
    events: readonly AuditEvent[],
  ): Promise<ChainHead> {
    if (known !== undefined) {
      const written = await this.#compareAndAppend(
        (text, values) => this.#db.query(CODE, text, values),
        streamKey,
        known,
        events,
      );
      if (written) return written;
    }
    return this.#db.transaction(CODE, async (client) => {
      // Inserts the head row if the stream is new; else a no-op update that takes its lock.
      const { rows } = await client.query<{ seq: string; hash: string }>(
        `INSERT INTO ${this.#heads} AS h (stream_key, seq, hash) VALUES ($1, 0, $2)
         ON CONFLICT (stream_key) DO UPDATE SET seq = h.seq RETURNING seq, hash`,
        [streamKey, GENESIS_HASH],
      );
      const row = rows[0];
      if (row === undefined) throw new TesseraError(CODE, "the audit stream's head is unreadable");
      const head = { seq: Number(row.seq), hash: row.hash };
      const written = await this.#compareAndAppend(
        (text, values) => client.query(text, values as unknown[]),
        streamKey,
        head,
        events,
      );
      if (!written) throw new TesseraError(CODE, "the audit stream's head moved under its lock");
      return written;
    });
  }

  /**
   * One statement: move the head from `head` to the last of `events` (linked after it) and
   * insert them, in order, or do nothing when the head is no longer `head`.
   */
  async #compareAndAppend(
    query: (text: string, values: readonly unknown[]) => Promise<pg.QueryResult>,
    streamKey: string,
    head: ChainHead,
    events: readonly AuditEvent[],
  ): Promise<ChainHead | undefined> {
    const calls: string[] = [];
    const traces: string[] = [];
    const bodies: string[] = [];
    let last = head;
    for (const event of events) {
      const linked = linkAuditEvent(event, last);
      calls.push(storageDigest(linked.callId));
      traces.push(storageDigest(linked.traceId));
      bodies.push(JSON.stringify(linked));
      last = { seq: linked.seq, hash: linked.hash };
    }
    // One event (a lone writer's case) goes as plain parameters: an array of one JSON text
    // costs an escape on each side for nothing.
    const single = events.length === 1;
    const result = await query(
      `WITH moved AS (
         INSERT INTO ${this.#heads} AS h (stream_key, seq, hash) VALUES ($1, $2, $3)
         ON CONFLICT (stream_key) DO UPDATE SET seq = EXCLUDED.seq, hash = EXCLUDED.hash
         WHERE h.seq = $4 AND h.hash = $5
         RETURNING 1
       )
       INSERT INTO ${this.#table} (call_key, trace_key, event) ${
         single
           ? "SELECT $6::text, $7::text, $8::text FROM moved"
           : `SELECT e.call_key, e.trace_key, e.event
              FROM moved, unnest($6::text[], $7::text[], $8::text[]) WITH ORDINALITY
                AS e(call_key, trace_key, event, n)
              ORDER BY e.n`
       }`,
      [
        streamKey,
        last.seq,
        last.hash,
        head.seq,
        head.hash,
        ...(single ? [calls[0], traces[0], bodies[0]] : [calls, traces, bodies]),
      ],
    );
    return result.rowCount === events.length ? last : undefined;
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
    // The newest `limit` are read backwards along the key and turned back to append order.
    const newest = filter.newest === true && filter.limit !== undefined;
    const { rows } = await this.#db.query<{ event: string }>(
      "audit_unavailable",
      `SELECT event FROM ${this.#table}${clause} ORDER BY seq${newest ? " DESC" : ""}${limit}`,
      values,
    );
    if (newest) rows.reverse();
    // A row replaced by text that is not an event is named by its position, not a crash.
    const events = rows.map((row, position) => parseStoredAuditEvent(row.event, position));
    // The keys only find candidates: an event is one call's or trace's by its own hashed
    // fields, so a row whose key was edited is never shown under another call's ID.
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
   * Pages along the key inside one snapshot. Numbers are taken before commit, so a writer
   * may commit a lower one after a higher one was read; outside one snapshot, paging by
   * number could pass it by for good, while the snapshot never shows it at all.
   *
   * Each row's `call_key` and `trace_key` are read with its event and must be the digests of
   * the event's own IDs, as every writer computes them: the hash chain covers only the
   * event's text, and a key edited beside it would hide the event from reads by ID
   * (`explain`) while the chain still verified.
   */
  readPages(options?: AuditPageOptions): AsyncIterable<readonly AuditEvent[]> {
    const pageSize = checkPageSize(options);
    const table = this.#table;
    return this.#db.snapshot(CODE, async function* (query) {
      let after = "0";
      let position = 0;
      for (;;) {
        const { rows } = await query(
          `SELECT seq, call_key, trace_key, event FROM ${table}
           WHERE seq > $1 ORDER BY seq LIMIT $2`,
          [after, pageSize],
        );
        if (rows.length === 0) return;
        after = String((rows[rows.length - 1] as { seq: string }).seq);
        yield (rows as StoredAuditRow[]).map((row) => {
          const at = position++;
          const event = parseStoredAuditEvent(row.event, at);
          if (row.call_key !== idKey(event.callId, uniqueStorageDigest)) {
            throw misindexedAuditEvent(event, at, "call ID");
          }
          if (row.trace_key !== idKey(event.traceId, storageDigest)) {
            throw misindexedAuditEvent(event, at, "trace ID");
          }
          return event;
        });
        if (rows.length < pageSize) return;
      }
    });
  }
}

interface StoredAuditRow {
  readonly seq: string;
  readonly call_key: string;
  readonly trace_key: string;
  readonly event: string;
}

/**
 * The key a writer files an ID under (`storageDigest`; call IDs through the uncached form, as
 * they never repeat), or none for a stored event whose ID is not text: no key matches it.
 */
function idKey(id: unknown, digest: (id: string) => string): string | undefined {
  return typeof id === "string" ? digest(id) : undefined;
}
