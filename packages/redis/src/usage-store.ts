import { type ConsumeResult, type GrantUsageStore, TesseraError } from "@tessera/core";
import { checkId, checkMaxUses, storageDigest } from "@tessera/core/store-kit";
import { type Connection, script } from "./connection.js";
import { TickBatch, type Waiting } from "./tick-batch.js";

const CODE = "usage_store_unavailable";

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

/**
 * CONSUME for each key in order (ARGV[i] key i's bound), answered as a flat list of pairs
 * (consumed 1 or 0, count): two consumes of one counter run one after the other, so the last
 * use goes to exactly one of them. A counter that is not an integer answers -1 for its
 * caller alone (fail closed), leaving the others' answers standing.
 */
const CONSUME_EACH = script(`
local out = {}
for i, key in ipairs(KEYS) do
  local value = redis.pcall('GET', key)
  local used = 0
  if value then used = tonumber(value) end
  if type(used) ~= 'number' or used ~= math.floor(used) then
    out[2 * i - 1] = -1
    out[2 * i] = 0
  elseif used < tonumber(ARGV[i]) then
    out[2 * i - 1] = 1
    out[2 * i] = redis.call('INCR', key)
  else
    out[2 * i - 1] = 0
    out[2 * i] = used
  end
end
return out
`);

/** Bounded so one script never holds the server for long. */
const PER_SCRIPT = 256;

interface PendingConsume extends Waiting<ConsumeResult> {
  readonly key: string;
  readonly maxUses: number;
}

/**
 * Usage counters: one integer key per (namespace, grant), never expiring. Bounded consumes
 * issued in the same tick go as one script call (CONSUME_EACH), each caller answered from
 * its own pair; a consume alone in its tick is the plain CONSUME.
 */
export class RedisUsageStore implements GrantUsageStore {
  readonly #connection: Connection;
  readonly #consumes = new TickBatch<PendingConsume>(PER_SCRIPT, (batch) =>
    this.#sendConsumes(batch),
  );

  constructor(connection: Connection) {
    this.#connection = connection;
  }

  /** The counter's key; exported for the self-test and the benchmark's raw baseline. */
  keyOf(namespaceId: string, grantId: string): string {
    checkId(namespaceId, "namespaceId");
    checkId(grantId, "grantId");
    return this.#connection.key("usage", storageDigest(namespaceId, grantId));
  }

  async getUsage(namespaceId: string, grantId: string): Promise<number> {
    const key = this.keyOf(namespaceId, grantId);
    const value = await this.#connection.run(CODE, (redis) => redis.get(key));
    return value === null ? 0 : Number(value);
  }

  tryConsume(namespaceId: string, grantId: string, maxUses: number): Promise<ConsumeResult> {
    let key: string;
    try {
      key = this.keyOf(namespaceId, grantId);
      checkMaxUses(maxUses);
    } catch (error) {
      return Promise.reject(error);
    }
    return new Promise<ConsumeResult>((resolve, reject) => {
      this.#consumes.add({ key, maxUses, resolve, reject });
    });
  }

  #sendConsumes(batch: readonly PendingConsume[]): void {
    if (batch.length === 1) {
      const { key, maxUses, resolve, reject } = batch[0] as PendingConsume;
      this.#connection.eval(CODE, CONSUME, [key], [maxUses]).then(resultOf).then(resolve, reject);
      return;
    }
    this.#connection
      .eval(
        CODE,
        CONSUME_EACH,
        batch.map((consume) => consume.key),
        batch.map((consume) => consume.maxUses),
      )
      .then(
        (replies) => {
          const whole = Array.isArray(replies) && replies.length === 2 * batch.length;
          batch.forEach((consume, i) => {
            try {
              // A short or missing list fails every caller closed: nobody is told "consumed".
              consume.resolve(resultOf(whole ? replies.slice(2 * i, 2 * i + 2) : undefined));
            } catch (error) {
              consume.reject(error);
            }
          });
        },
        (error: unknown) => {
          for (const consume of batch) consume.reject(error);
        },
      );
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
    const reply = await this.#connection.eval(CODE, CONSUME_MANY, [key], [maxUses, count]);
    return resultOf(reply);
  }
}

function resultOf(reply: unknown): ConsumeResult {
  if (
    !Array.isArray(reply) ||
    (reply[0] !== 0 && reply[0] !== 1) ||
    !Number.isSafeInteger(reply[1])
  ) {
    // Anything but the script's own answer means we cannot tell what happened: fail closed.
    throw new TesseraError(CODE, "unexpected reply to the consume script");
  }
  return { consumed: reply[0] === 1, used: reply[1] as number };
}
