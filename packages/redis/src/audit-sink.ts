import type { AuditEvent, ReadableAuditSink } from "@tessera/core";
import {
  type AuditFilter,
  checkAuditFilter,
  parseAuditEvent,
  storageDigest,
} from "@tessera/core/store-kit";
import { type Connection, script } from "./connection.js";

/**
 * Audit in a Redis stream (`<prefix>audit`, field `e` = the event JSON): XADD only, so the
 * trail is append-only and ordered by stream ID. Two lists index the stream IDs by call and by
 * trace digest, written in the same script as the entry, so `explain` reads one call's events
 * without scanning the stream.
 */
const APPEND = script(`
local id = redis.call('XADD', KEYS[1], '*', 'e', ARGV[1])
redis.call('RPUSH', KEYS[2], id)
redis.call('RPUSH', KEYS[3], id)
return id
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

  constructor(connection: Connection) {
    this.#connection = connection;
  }

  async append(event: AuditEvent): Promise<void> {
    const valid = parseAuditEvent(event);
    await this.#connection.eval(
      "audit_unavailable",
      APPEND,
      [
        this.#connection.key("audit"),
        this.#connection.key("audit-call", storageDigest(valid.callId)),
        this.#connection.key("audit-trace", storageDigest(valid.traceId)),
      ],
      [JSON.stringify(valid)],
    );
  }

  async read(filter: AuditFilter = {}): Promise<readonly AuditEvent[]> {
    checkAuditFilter(filter);
    const { callId, traceId, limit } = filter;
    if (limit === 0) return [];
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
      events = (reply as string[]).map((json) => JSON.parse(json) as AuditEvent);
      if (callId !== undefined && traceId !== undefined) {
        events = events.filter((event) => event.traceId === traceId);
      }
    } else {
      const entries = await this.#connection.run("audit_unavailable", (redis) =>
        limit === undefined
          ? redis.xrange(this.#connection.key("audit"), "-", "+")
          : redis.xrange(this.#connection.key("audit"), "-", "+", "COUNT", limit),
      );
      events = entries.map(([, fields]) => JSON.parse(fields[1] as string) as AuditEvent);
    }
    return limit === undefined ? events : events.slice(0, limit);
  }
}
