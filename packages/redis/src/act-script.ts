import { TesseraError } from "@tessera/core";
import { script } from "./connection.js";
import { TURN_ON_STALE, TURN_ON_WRITE, turnCheck } from "./write-turn.js";

/**
 * The act ledger's one script per batch: a compare-and-write over everything the batch
 * assumed. Lua in Redis has no SHA-256, so the client links each event into its stream's chain
 * and decides each spend before sending; the script checks that those assumptions still hold
 * — every stream's head, every spent counter's value, every claimed key absent — and only
 * then writes the whole batch: the claims (`SET … PX`), the counters, the events (`XADD`, the
 * call and trace index lists) and the new heads. When any assumption is stale it writes
 * nothing and answers what it found, so the client relinks and decides again. Redis runs a
 * script without interleaving any other command, so the check and the write are one step for
 * every client of the server: a batch is all there or none of it is.
 *
 * KEYS: 1 the audit stream, 2 the heads hash, 3 the write turn (`write-turn.ts`), then every
 * other key once (claims, counters, index lists), named by position in ARGV.
 * ARGV: claim TTL (ms); the stream count, then per stream: name, expected head, new head;
 * the counter count, then per counter: key position, expected value, new value; the act
 * count, then per act: claim key position (0: none), claim value, call index position, trace
 * index position, the linked event's JSON (empty for an act whose spend lost: its claim key
 * and versions are checked like any other act's, and nothing of it is written); then the
 * grant-version check count, then per check: the act's 1-based position, the holder's
 * `grants-versions` key position, the holder's field, the version the act was decided on (a
 * missing field is version "0"); last, the writer's token and whether this try asks for the
 * turn ('1' or '0').
 *
 * Answer: 1 when written; otherwise `{0, heads, counters, taken, moved, mine}`: each stream's
 * head and each counter's value as found, for each act whose claim key is held its 1-based
 * position followed by the value that holds it, the 1-based positions of the acts whose
 * grant version moved (they are answered `stale`, never written), and 1 when the writer holds
 * the turn after this try (another writer holding it is one more reason to write nothing).
 */
export const RECORD_ACTS = script(`
local ttl = ARGV[1]
local i = 2
local streams = tonumber(ARGV[i]); i = i + 1
local streamsAt = i
local stale = false
local heads = {}
for s = 1, streams do
  local head = redis.call('HGET', KEYS[2], ARGV[i]) or ''
  if head ~= ARGV[i + 1] then stale = true end
  heads[s] = head
  i = i + 3
end
local counters = tonumber(ARGV[i]); i = i + 1
local countersAt = i
local values = {}
for c = 1, counters do
  local value = redis.call('GET', KEYS[tonumber(ARGV[i])]) or '0'
  if value ~= ARGV[i + 1] then stale = true end
  values[c] = value
  i = i + 3
end
local acts = tonumber(ARGV[i]); i = i + 1
local actsAt = i
local taken = {}
for a = 1, acts do
  local claim = tonumber(ARGV[i])
  if claim > 0 then
    local held = redis.call('GET', KEYS[claim])
    if held then
      stale = true
      taken[#taken + 1] = a
      taken[#taken + 1] = held
    end
  end
  i = i + 5
end
local checks = tonumber(ARGV[i]); i = i + 1
local moved = {}
for c = 1, checks do
  local version = redis.call('HGET', KEYS[tonumber(ARGV[i + 1])], ARGV[i + 2]) or '0'
  if version ~= ARGV[i + 3] then
    stale = true
    moved[#moved + 1] = tonumber(ARGV[i])
  end
  i = i + 4
end
${turnCheck("KEYS[3]", "ARGV[i]", "ARGV[i + 1]")}
if stale or turnRefused then
${TURN_ON_STALE}
  return {0, heads, values, taken, moved, turnMine}
end
${TURN_ON_WRITE}
i = actsAt
for a = 1, acts do
  if ARGV[i + 4] ~= '' then
    local claim = tonumber(ARGV[i])
    if claim > 0 then redis.call('SET', KEYS[claim], ARGV[i + 1], 'PX', ttl) end
    local id = redis.call('XADD', KEYS[1], '*', 'e', ARGV[i + 4])
    redis.call('RPUSH', KEYS[tonumber(ARGV[i + 2])], id)
    redis.call('RPUSH', KEYS[tonumber(ARGV[i + 3])], id)
  end
  i = i + 5
end
i = countersAt
for c = 1, counters do
  if ARGV[i + 2] ~= ARGV[i + 1] then redis.call('SET', KEYS[tonumber(ARGV[i])], ARGV[i + 2]) end
  i = i + 3
end
i = streamsAt
for s = 1, streams do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 2])
  i = i + 3
end
return 1
`);

/** What the script found when the batch's assumptions were stale. */
export interface StaleReply {
  readonly heads: readonly string[];
  readonly counters: readonly string[];
  /** 0-based act position → the value holding its claim key. */
  readonly taken: ReadonlyMap<number, string>;
  /** 0-based positions of the acts whose grant version moved. */
  readonly moved: ReadonlySet<number>;
  /** Whether the writer holds the write turn after this try. */
  readonly holdsTurn: boolean;
}

/** The script's answer: `"written"`, or what it found; anything else fails closed. */
export function readReply(reply: unknown): "written" | StaleReply {
  if (reply === 1) return "written";
  if (
    Array.isArray(reply) &&
    reply[0] === 0 &&
    isStrings(reply[1]) &&
    isStrings(reply[2]) &&
    Array.isArray(reply[3]) &&
    Array.isArray(reply[4]) &&
    reply[4].every((position: unknown) => Number.isSafeInteger(position)) &&
    (reply[5] === 0 || reply[5] === 1)
  ) {
    const flat = reply[3] as unknown[];
    const taken = new Map<number, string>();
    for (let i = 0; i + 1 < flat.length; i += 2) {
      const position = flat[i];
      const value = flat[i + 1];
      if (!Number.isSafeInteger(position) || typeof value !== "string") break;
      taken.set((position as number) - 1, value);
    }
    if (taken.size * 2 === flat.length) {
      const moved = new Set((reply[4] as number[]).map((position) => position - 1));
      return { heads: reply[1], counters: reply[2], taken, moved, holdsTurn: reply[5] === 1 };
    }
  }
  // We cannot tell what the script did: fail closed, never "recorded".
  throw new TesseraError("store_unavailable", "unexpected reply to the act script");
}

function isStrings(value: unknown): value is string[] {
  return Array.isArray(value) && value.every((item) => typeof item === "string");
}

/** A counter as found: a non-negative integer, else the store cannot be trusted. */
export function decodeCounter(text: string): number {
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < 0 || String(value) !== text) {
    throw new TesseraError("store_unavailable", "a usage counter is unreadable");
  }
  return value;
}
