/**
 * The claim store's Lua scripts (`claim-store.ts`): a tick's claims, and a tick's settles, each
 * as one script call.
 */
import { script } from "./connection.js";

/**
 * Settles each key with its receipt (and answer, when given: `ARGV[i]` is the settlement as
 * stored, see `settlementOf`), in order: only ever appends to an existing, unsettled claim
 * (`KEEPTTL`), never creates one. Per key: 0 no claim, 1 settled, 2 already settled (the first
 * outcome stands, answer included, also for a key given twice).
 */
export const SETTLE = script(`
local out = {}
for i, key in ipairs(KEYS) do
  local value = redis.call('GET', key)
  if not value then out[i] = 0
  elseif string.find(value, '\\n', 1, true) then out[i] = 2
  else
    redis.call('SET', key, value .. '\\n' .. ARGV[i], 'KEEPTTL')
    out[i] = 1
  end
end
return out
`);

/**
 * Claims each key as `SET key ARGV[i + 1] PX ARGV[1] NX GET` would, in order, and answers per
 * key what that command answers: false (nil: claimed) or the holder's value, read in the same
 * atomic step (a key given twice: the second reads the first's record). `pcall`: a key the
 * server refuses (WRONGTYPE) answers its error in its own slot, failing that claim closed, not
 * its neighbours. Lua's false keeps the array whole (a nil would cut it short).
 */
export const CLAIM = script(`
local out = {}
for i, key in ipairs(KEYS) do
  out[i] = redis.pcall('SET', key, ARGV[i + 1], 'PX', ARGV[1], 'NX', 'GET')
end
return out
`);

/** Claims and settles per script: bounded so one script never holds the server for long. */
export const CLAIMS_PER_SCRIPT = 256;
export const SETTLES_PER_SCRIPT = 256;
