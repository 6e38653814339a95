import { type AuditEvent, TesseraError, type Withdrawal, type WithdrawResult } from "@tessera/core";
import {
  auditStreamOf,
  type ChainHead,
  checkWithdrawal,
  EMPTY_HEAD,
  linkAuditEvent,
  storageDigest,
} from "@tessera/core/store-kit";
import { decodeHead, encodeHead } from "./chain-head.js";
import { claimKeyOf, claimValueOf, settlementOf } from "./claim-store.js";
import { type Connection, script } from "./connection.js";
import { usageKeyOf } from "./usage-store.js";
import {
  newWriterToken,
  TURN_ON_STALE,
  TURN_ON_WRITE,
  turnCheck,
  turnKeyOf,
  WriteTries,
} from "./write-turn.js";

/** A withdrawal is of an act with a claim: its failure is the claim store's. */
const CODE = "claim_store_unavailable";

/**
 * Withdraws one act, a compare-and-write like `RECORD_ACTS`: Lua in Redis has no SHA-256, so
 * the client links the event after the head it remembers and the script writes only when
 * that head still holds. Every read comes before the first write (a script that errors
 * midway keeps what it wrote), and Redis runs it without interleaving any other command, so
 * the compare and the writes are one step for every client: all of the withdrawal or none.
 *
 * KEYS: 1 the claim, 2 the audit stream, 3 the heads hash, 4 the call index, 5 the trace
 * index, 6 the write turn (`write-turn.ts`), 7 the act's counter (only when it spent).
 * ARGV: 1 the act's claim as stored while unsettled (`claimValueOf`: the record, exactly),
 * 2 the settlement appended (`failed` receipt and answer), 3 the stream's name, 4 the head
 * the event was linked after, 5 the head after it, 6 the linked event's JSON, 7 the writer's
 * token, 8 whether this try asks for the turn.
 *
 * Answer: `not_recorded` (no claim), `kept` (a settled claim, or another record: any value
 * other than the act's unsettled record), `withdrawn`, or `{0, head, mine}` when the stream's
 * head moved or another writer holds the turn (the head found, 1 when this writer holds the
 * turn after the try; the client links again).
 */
export const WITHDRAW_ACT = script(`
local held = redis.call('GET', KEYS[1])
if not held then return 'not_recorded' end
if held ~= ARGV[1] then return 'kept' end
local head = redis.call('HGET', KEYS[3], ARGV[3]) or ''
${turnCheck("KEYS[6]", "ARGV[7]", "ARGV[8]")}
if head ~= ARGV[4] or turnRefused then
${TURN_ON_STALE}
  return {0, head, turnMine}
end
local used = 0
if #KEYS > 6 then
  used = tonumber(redis.call('GET', KEYS[7]) or '0')
  if not used then return redis.error_reply('a usage counter is unreadable') end
end
${TURN_ON_WRITE}
redis.call('SET', KEYS[1], held .. '\\n' .. ARGV[2], 'KEEPTTL')
if used > 0 then redis.call('DECR', KEYS[7]) end
local id = redis.call('XADD', KEYS[2], '*', 'e', ARGV[6])
redis.call('RPUSH', KEYS[4], id)
redis.call('RPUSH', KEYS[5], id)
redis.call('HSET', KEYS[3], ARGV[3], ARGV[5])
return 'withdrawn'
`);

/** A withdrawal checked and laid out for the script (the event linked per attempt). */
interface Planned {
  readonly keys: readonly string[];
  readonly record: string;
  readonly settlement: string;
  readonly event: AuditEvent;
  readonly stream: string;
}

/**
 * `ActLedger.withdraw` on Redis: one script call, sent again (linked anew) while the stream's
 * head moved under it, taking turns with other writers when it keeps losing. `heads` is the
 * ledger's memory of stream heads, read to link and moved when the script wrote; forgotten
 * for the stream when the answer is lost.
 */
export async function withdrawAct(
  connection: Connection,
  heads: Map<string, ChainHead>,
  withdrawal: Withdrawal,
): Promise<WithdrawResult> {
  const planned = plan(connection, withdrawal);
  const writer = { connection, code: CODE, token: newWriterToken() } as const;
  const tries = new WriteTries(
    writer,
    () => new TesseraError(CODE, "the act's stream kept moving: too many concurrent writers"),
  );
  try {
    for (;;) {
      const askTurn = tries.next();
      const start = heads.get(planned.stream) ?? EMPTY_HEAD;
      const linked = linkAuditEvent(planned.event, start);
      const end = { seq: linked.seq, hash: linked.hash };
      const reply = await connection.eval(CODE, WITHDRAW_ACT, planned.keys, [
        planned.record,
        planned.settlement,
        planned.stream,
        encodeHead(start),
        encodeHead(end),
        JSON.stringify(linked),
        writer.token,
        askTurn,
      ]);
      if (reply === "withdrawn") {
        heads.set(planned.stream, end);
        return reply;
      }
      if (reply === "not_recorded" || reply === "kept") {
        tries.end();
        return reply;
      }
      if (
        !Array.isArray(reply) ||
        reply[0] !== 0 ||
        typeof reply[1] !== "string" ||
        (reply[2] !== 0 && reply[2] !== 1)
      ) {
        // We cannot tell what the script did: fail closed, the caller tries again.
        throw new TesseraError(CODE, "unexpected reply to the withdraw script");
      }
      heads.set(planned.stream, decodeHead(reply[1], "store_unavailable"));
      tries.found(reply[2] === 1);
      await tries.lost();
    }
  } catch (error) {
    tries.end();
    // A reply lost after the script ran leaves the remembered head wrong: the script tells.
    heads.delete(planned.stream);
    if (error instanceof TesseraError && error.code === "store_unavailable") {
      throw new TesseraError(CODE, error.message, { cause: error });
    }
    throw error;
  }
}

/**
 * Checks the withdrawal (`invalid_input`, nothing sent) and names its keys, all under the
 * connection's prefix (one hash slot when the prefix carries a hash tag). The receipt's
 * instant is the withdrawal event's, as a denial's settle takes its event's.
 */
function plan(connection: Connection, withdrawal: Withdrawal): Planned {
  const { act, event } = checkWithdrawal(withdrawal);
  const settlement = settlementOf(
    { status: "failed", settledAt: Date.parse(event.at) },
    withdrawal.answer,
  );
  const keys = [
    claimKeyOf(connection, act.claim.key),
    connection.key("audit"),
    connection.key("audit-heads"),
    connection.key("audit-call", storageDigest(event.callId)),
    connection.key("audit-trace", storageDigest(event.traceId)),
    turnKeyOf(connection),
  ];
  if (act.spend !== undefined) {
    keys.push(usageKeyOf(connection, act.spend.namespaceId, act.spend.grantId));
  }
  return {
    keys,
    record: claimValueOf(act.claim.key, act.claim.record),
    settlement,
    event,
    stream: auditStreamOf(event),
  };
}
