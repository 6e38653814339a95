import {
  type AuditEvent,
  AuditEventSchema,
  type ReadableAuditSink,
  storageDigest,
  TesseraError,
} from "@tessera/core";
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
    const parsed = AuditEventSchema.safeParse(event);
    if (!parsed.success) {
      throw new TesseraError(
        "invalid_input",
        "the audit event does not match the AuditEvent schema",
      );
    }
    await this.#connection.eval(
      "audit_unavailable",
      APPEND,
      [
        this.#connection.key("audit"),
        this.#connection.key("audit-call", storageDigest(parsed.data.callId)),
        this.#connection.key("audit-trace", storageDigest(parsed.data.traceId)),
      ],
      [JSON.stringify(parsed.data)],
    );
  }

  async read(
    filter: { callId?: string; traceId?: string; limit?: number } = {},
  ): Promise<readonly AuditEvent[]> {
    const { callId, traceId, limit } = filter;
    if (limit !== undefined && (!Number.isSafeInteger(limit) || limit < 0)) {
      throw new TesseraError("invalid_input", "limit must be a non-negative integer");
    }
    if (limit === 0) return [];
    let events: AuditEvent[];
    if (callId !== undefined || traceId !== undefined) {
      const index =
        callId !== undefined
          ? this.#connection.key("audit-call", storageDigest(String(callId)))
          : this.#connection.key("audit-trace", storageDigest(String(traceId)));
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
