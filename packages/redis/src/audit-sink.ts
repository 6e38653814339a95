import {
  type ActLedger,
  type AuditEvent,
  type ReadableAuditSink,
  TesseraError,
} from "@tessera/core";
import {
  AuditAppendQueue,
  type AuditFilter,
  type AuditPageOptions,
  type ChainHead,
  checkAuditFilter,
  checkPageSize,
  EMPTY_HEAD,
  linkAuditEvent,
  misindexedAuditEvent,
  parseStoredAuditEvent,
  storageDigest,
} from "@tessera/core/store-kit";
import { firstMissingFromIndex } from "./audit-index.js";
import { decodeHead, encodeHead } from "./chain-head.js";
import { type Connection, script } from "./connection.js";
import {
  newWriterToken,
  TURN_ON_STALE,
  TURN_ON_WRITE,
  type TurnWriter,
  turnCheck,
  turnKeyOf,
  WriteTries,
} from "./write-turn.js";

const CODE = "audit_unavailable";
/** Events written by one script at most: bounds the script's run, which blocks the server. */
const MAX_BATCH = 128;

/**
 * Audit in a Redis stream (`<prefix>audit`, field `e` = the event JSON), a hash chain per
 * audit stream (see core's `audit/chain.ts`): XADD only, so the trail is append-only and
 * ordered by stream ID. Two lists index the stream IDs by call and by trace digest, written in
 * the same script as the entry, so `explain` reads one call's events without scanning.
 *
 * Lua in Redis has no SHA-256, so events are linked here and the script is a compare-and-
 * append: it writes them only if the stream's head (a field of `<prefix>audit-heads`, as
 * `seq:hash`) is still the one they were linked to, and otherwise answers the current head,
 * to link to and try again. Scripts run one at a time, so the check and the write are one
 * step for every client. This process remembers each head and sends one stream's appends one
 * batch at a time, so a lone writer never retries; writers in other processes make it retry,
 * taking turns when it keeps losing (`write-turn.ts`), for a bounded time.
 *
 * KEYS: 1 the stream, 2 the heads hash, 3 the write turn, then per event its call and trace
 * index lists. ARGV: 1 the audit stream's name, 2 the head linked after, 3 the head after the
 * events, 4 the writer's token, 5 whether this try asks for the turn, then the events' JSON.
 * Answer: 1 when written, else `{head, mine}` (the head found; 1 when this writer holds the
 * turn after the try).
 */
const APPEND = script(`
local head = redis.call('HGET', KEYS[2], ARGV[1]) or ''
${turnCheck("KEYS[3]", "ARGV[4]", "ARGV[5]")}
if head ~= ARGV[2] or turnRefused then
${TURN_ON_STALE}
  return {head, turnMine}
end
${TURN_ON_WRITE}
for i = 6, #ARGV do
  local id = redis.call('XADD', KEYS[1], '*', 'e', ARGV[i])
  redis.call('RPUSH', KEYS[2 * (i - 5) + 2], id)
  redis.call('RPUSH', KEYS[2 * (i - 5) + 3], id)
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
return 1
`);

const READ_INDEXED = script(`
local ids = redis.call('LRANGE', KEYS[2], 0, -1)
local out = {}
for _, id in ipairs(ids) do
  local entries = redis.call('XRANGE', KEYS[1], id, id)
  if entries[1] then out[#out + 1] = entries[1][2][2] end
end
return out
`);

export class RedisAuditSink implements ReadableAuditSink {
  readonly #connection: Connection;
  // A stale head costs one more try (the script answers the current one), never a wrong link.
  readonly #queue = new AuditAppendQueue<ChainHead>({
    maxBatch: MAX_BATCH,
    startHead: EMPTY_HEAD,
    write: (stream, head, events) => this.#write(stream, head, events),
  });

  readonly #ledger: ActLedger | undefined;
  /** This sink as a writer taking turns (`write-turn.ts`). */
  readonly #writer: TurnWriter;

  /**
   * With `ledger` (a bundle's own act ledger over the same connection), events are appended as
   * acts of that ledger: one writer per connection, so the ledger and the sink never make each
   * other relink (each would otherwise find the head the other moved and pay a second script).
   */
  constructor(connection: Connection, ledger?: ActLedger) {
    this.#connection = connection;
    this.#ledger = ledger;
    this.#writer = { connection, code: CODE, token: newWriterToken() };
  }

  append(event: AuditEvent): Promise<void> {
    if (this.#ledger !== undefined) return this.#ledger.record({ event }).then(nothing);
    return this.#queue.append(event);
  }

  /** Links `events` after the head and appends them, relinking while the head moves. */
  async #write(
    stream: string,
    known: ChainHead,
    events: readonly AuditEvent[],
  ): Promise<ChainHead> {
    const keys = [
      this.#connection.key("audit"),
      this.#connection.key("audit-heads"),
      turnKeyOf(this.#connection),
    ];
    for (const event of events) {
      keys.push(
        this.#connection.key("audit-call", storageDigest(event.callId)),
        this.#connection.key("audit-trace", storageDigest(event.traceId)),
      );
    }
    const tries = new WriteTries(
      this.#writer,
      () => new TesseraError(CODE, "the audit stream kept moving: too many concurrent writers"),
    );
    let head = known;
    try {
      for (;;) {
        const askTurn = tries.next();
        const bodies: string[] = [];
        let last = head;
        for (const event of events) {
          const linked = linkAuditEvent(event, last);
          bodies.push(JSON.stringify(linked));
          last = { seq: linked.seq, hash: linked.hash };
        }
        const reply = await this.#connection.eval(CODE, APPEND, keys, [
          stream,
          encodeHead(head),
          encodeHead(last),
          this.#writer.token,
          askTurn,
          ...bodies,
        ]);
        if (reply === 1) return last;
        if (
          !Array.isArray(reply) ||
          typeof reply[0] !== "string" ||
          (reply[1] !== 0 && reply[1] !== 1)
        ) {
          throw new TesseraError(CODE, "the audit append script answered something unexpected");
        }
        head = decodeHead(reply[0], CODE);
        tries.found(reply[1] === 1);
        await tries.lost();
      }
    } catch (error) {
      tries.end();
      throw error;
    }
  }

  async read(filter: AuditFilter = {}): Promise<readonly AuditEvent[]> {
    checkAuditFilter(filter);
    const { callId, traceId, limit } = filter;
    if (limit === 0) return [];
    const newest = filter.newest === true && limit !== undefined;
    let events: AuditEvent[];
    if (callId !== undefined || traceId !== undefined) {
      const index =
        callId !== undefined
          ? this.#connection.key("audit-call", storageDigest(callId))
          : this.#connection.key("audit-trace", storageDigest(traceId as string));
      const reply = await this.#connection.eval(
        "audit_unavailable",
        READ_INDEXED,
        [this.#connection.key("audit"), index],
        [],
      );
      events = (reply as string[]).map((json, position) => parseStoredAuditEvent(json, position));
      // The list only finds candidates: an event is one call's or trace's by its own hashed
      // fields, so an ID pushed onto another call's list never shows the event under that
      // call. (`audit verify` reports an event missing from its own list: `readPages`.)
      events = events.filter(
        (event) =>
          (callId === undefined || event.callId === callId) &&
          (traceId === undefined || event.traceId === traceId),
      );
    } else {
      const key = this.#connection.key("audit");
      const entries = await this.#connection.run("audit_unavailable", (redis) =>
        limit === undefined
          ? redis.xrange(key, "-", "+")
          : newest
            ? // The newest `limit`, read backwards and turned back to append order.
              redis.xrevrange(key, "+", "-", "COUNT", limit).then((found) => found.reverse())
            : redis.xrange(key, "-", "+", "COUNT", limit),
      );
      // An entry replaced by text that is not an event is named by its position, not a crash.
      events = entries.map(([, fields], position) => parseStoredAuditEvent(fields[1], position));
    }
    if (limit === undefined) return events;
    return newest ? events.slice(-limit) : events.slice(0, limit);
  }

  /**
   * Pages along the stream's entry IDs up to the last entry when reading began. The server
   * runs one command at a time and an entry's ID is taken when it is added, so no entry can
   * appear behind one already read: the pages skip nothing.
   *
   * Each page's entries are looked for in their call and trace index lists
   * (`audit-index.ts`): the hash chain covers only the events, and a list renamed or edited
   * would hide an event from reads by ID (`explain`) while the chain still verified.
   */
  async *readPages(options?: AuditPageOptions): AsyncGenerator<readonly AuditEvent[]> {
    const pageSize = checkPageSize(options);
    const key = this.#connection.key("audit");
    const [last] = await this.#connection.run(CODE, (redis) =>
      redis.xrevrange(key, "+", "-", "COUNT", 1),
    );
    if (last === undefined) return;
    let from = "-";
    let position = 0;
    for (;;) {
      const entries = await this.#connection.run(CODE, (redis) =>
        redis.xrange(key, from, last[0], "COUNT", pageSize),
      );
      const final = entries[entries.length - 1];
      if (final === undefined) return;
      const first = position;
      position += entries.length;
      yield await this.#checkedPage(entries, first);
      if (final[0] === last[0]) return;
      from = `(${final[0]}`;
    }
  }

  /**
   * A page's events, each checked against the index lists it was written to. The first
   * fault in read order is thrown: an entry that is no event, or one missing from its lists.
   */
  async #checkedPage(
    entries: readonly [id: string, fields: string[]][],
    first: number,
  ): Promise<readonly AuditEvent[]> {
    const events: AuditEvent[] = [];
    let unreadable: unknown;
    for (const [, fields] of entries) {
      try {
        events.push(parseStoredAuditEvent(fields[1], first + events.length));
      } catch (error) {
        // Thrown only if no event before it is misindexed, which is the earlier fault.
        unreadable = error;
        break;
      }
    }
    const ids = entries.slice(0, events.length).map(([id]) => id);
    const missing = await firstMissingFromIndex(this.#connection, ids, events);
    if (missing !== undefined) {
      const event = events[missing.event] as AuditEvent;
      throw misindexedAuditEvent(event, first + missing.event, missing.index);
    }
    if (unreadable !== undefined) throw unreadable;
    return events;
  }
}

function nothing(): void {}
