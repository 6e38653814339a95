import {
  type ConsumeResult,
  type GrantUsageStore,
  type ReleaseResult,
  TesseraError,
} from "@tessera/core";
import { checkId, checkMaxUses, storageDigest } from "@tessera/core/store-kit";
import { type Connection, script } from "./connection.js";

/**
 * The bounded consume, whole, on the server. Redis runs a script without interleaving any
 * other command, so the read of `used`, the comparison and the increment are one step for
 * every client of the server: racing callers get exactly `max` successes.
 */
export const CONSUME = script(`
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
if used < tonumber(ARGV[1]) then
  return {1, redis.call('INCR', KEYS[1])}
end
return {0, used}
`);

/** `count` uses at once, or none: the guard and the add in one script, like CONSUME. */
export const CONSUME_MANY = script(`
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
local count = tonumber(ARGV[2])
if used + count <= tonumber(ARGV[1]) then
  return {1, redis.call('INCRBY', KEYS[1], count)}
end
return {0, used}
`);

/** One use back, never below zero: the guard and the decrement in one script. */
export const RELEASE = script(`
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
if used > 0 then
  return {1, redis.call('DECR', KEYS[1])}
end
return {0, used}
`);

/** Usage counters: one integer key per (namespace, grant), never expiring. */
export class RedisUsageStore implements GrantUsageStore {
  readonly #connection: Connection;

  constructor(connection: Connection) {
    this.#connection = connection;
  }

  /** The counter's key; exported for the self-test and the benchmark's raw baseline. */
  keyOf(namespaceId: string, grantId: string): string {
    return usageKeyOf(this.#connection, namespaceId, grantId);
  }

  async getUsage(namespaceId: string, grantId: string): Promise<number> {
    const key = this.keyOf(namespaceId, grantId);
    const value = await this.#connection.run("usage_store_unavailable", (redis) => redis.get(key));
    return value === null ? 0 : Number(value);
  }

  async tryConsume(namespaceId: string, grantId: string, maxUses: number): Promise<ConsumeResult> {
    const key = this.keyOf(namespaceId, grantId);
    checkMaxUses(maxUses);
    const reply = await this.#connection.eval("usage_store_unavailable", CONSUME, [key], [maxUses]);
    return resultOf(reply);
  }

  async release(namespaceId: string, grantId: string): Promise<ReleaseResult> {
    const key = this.keyOf(namespaceId, grantId);
    const reply = await this.#connection.eval("usage_store_unavailable", RELEASE, [key], []);
    const { consumed, used } = resultOf(reply);
    return { released: consumed, used };
  }

  async tryConsumeMany(
    namespaceId: string,
    grantId: string,
    count: number,
    maxUses: number,
  ): Promise<ConsumeResult> {
    const key = this.keyOf(namespaceId, grantId);
    checkMaxUses(count);
    checkMaxUses(maxUses);
    const reply = await this.#connection.eval(
      "usage_store_unavailable",
      CONSUME_MANY,
      [key],
      [maxUses, count],
    );
    return resultOf(reply);
  }
}

/** `<prefix>usage:<sha256(namespace, grant)>`, the IDs checked first (the act ledger's too). */
export function usageKeyOf(connection: Connection, namespaceId: string, grantId: string): string {
  checkId(namespaceId, "namespaceId");
  checkId(grantId, "grantId");
  return connection.key("usage", storageDigest(namespaceId, grantId));
}

function resultOf(reply: unknown): ConsumeResult {
  if (
    !Array.isArray(reply) ||
    (reply[0] !== 0 && reply[0] !== 1) ||
    !Number.isSafeInteger(reply[1])
  ) {
    // Anything but the script's own answer means we cannot tell what happened: fail closed.
    throw new TesseraError("usage_store_unavailable", "unexpected reply to the consume script");
  }
  return { consumed: reply[0] === 1, used: reply[1] as number };
}
