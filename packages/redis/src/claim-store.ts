import {
  type ClaimKey,
  type ClaimReceipt,
  type ClaimRecord,
  type ClaimResult,
  type ClaimStore,
  checkClaimKey,
  checkReceipt,
  checkRecord,
  claimKeyDigest,
  type StoredClaim,
  storageDigest,
  TesseraError,
} from "@tessera/core";
import { type Connection, script } from "./connection.js";

/**
 * A claim is one string key, `<prefix>claim:<claimKeyDigest>`, holding the JSON record; once
 * settled, a newline and the JSON receipt are appended (JSON never contains a raw newline).
 *
 * The claim, as one atomic server-side step: `SET key value NX PX ttl`, its reply checked to
 * be exactly the status "OK" (won) or nil (already held; the holder's record is returned in
 * the same step, so it cannot expire or be deleted in between). Any other reply is an
 * error, never a win. The session index (for `endSession`) is written first and the in-doubt
 * index on a win, in the same script: a worker killed right after its claim leaves the
 * claim listed in doubt, and no SCAN is ever needed.
 */
const CLAIM = script(`
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local reply = redis.call('SET', KEYS[3], ARGV[3], 'NX', 'PX', ARGV[2])
if reply == false then return {0, redis.call('GET', KEYS[3])} end
if type(reply) == 'table' and reply['ok'] == 'OK' then
  redis.call('SADD', KEYS[2], ARGV[1])
  return {1}
end
return redis.error_reply('unexpected reply to SET NX')
`);

/** Only ever appends to an existing, unsettled claim (`KEEPTTL`), never creates one. */
const SETTLE = script(`
local value = redis.call('GET', KEYS[1])
if not value then return 0 end
redis.call('SREM', KEYS[2], ARGV[2])
if string.find(value, '\\n', 1, true) then return 2 end
redis.call('SET', KEYS[1], value .. '\\n' .. ARGV[1], 'KEEPTTL')
return 1
`);

/** Deletes every claim of a session and its index entries, as one step. */
const END_SESSION = script(`
local digests = redis.call('SMEMBERS', KEYS[1])
for _, d in ipairs(digests) do
  redis.call('DEL', ARGV[1] .. 'claim:' .. d)
  redis.call('SREM', KEYS[2], d)
end
redis.call('DEL', KEYS[1])
return #digests
`);

/**
 * Claims in Redis: one string key per claim (`<prefix>claim:<claimKeyDigest>`), living
 * `claimTtlMs`, which must cover the host session. Index sets per session and for in-doubt
 * claims; an index entry whose claim is settled or expired is dropped when next listed.
 */
export class RedisClaimStore implements ClaimStore {
  readonly #connection: Connection;
  readonly #ttlMs: number;
  readonly #onClose: () => Promise<void>;
  #closed = false;

  constructor(
    connection: Connection,
    ttlMs: number,
    onClose: () => Promise<void> = async () => {},
  ) {
    this.#connection = connection;
    this.#ttlMs = ttlMs;
    this.#onClose = onClose;
  }

  /** The key a claim lives under (the self-test checks its TTL). */
  keyOf(key: ClaimKey): string {
    return this.#connection.key("claim", claimKeyDigest(key));
  }

  async claim(key: ClaimKey, record: ClaimRecord): Promise<ClaimResult> {
    this.#checkOpen();
    checkClaimKey(key);
    checkRecord(record);
    const stored: StoredClaim = {
      session: key.session,
      functionCallId: key.functionCallId,
      bodyHash: record.bodyHash,
      claimedAt: record.claimedAt,
      ...(record.worker === undefined ? {} : { worker: record.worker }),
    };
    const id = claimKeyDigest(key);
    const session = storageDigest(key.session);
    const reply = await this.#connection.eval(
      "claim_store_unavailable",
      CLAIM,
      [
        this.#connection.key("session", session),
        this.#connection.key("in-doubt"),
        this.#connection.key("claim", id),
      ],
      [id, this.#ttlMs, JSON.stringify(stored)],
    );
    if (Array.isArray(reply) && reply.length === 1 && reply[0] === 1) return { status: "claimed" };
    if (
      Array.isArray(reply) &&
      reply.length === 2 &&
      reply[0] === 0 &&
      typeof reply[1] === "string"
    ) {
      return { status: "already_claimed", existing: parse(reply[1]) };
    }
    // Anything else means we cannot tell who holds the key: fail closed, never "claimed".
    throw new TesseraError("claim_store_unavailable", "unexpected reply to the claim script");
  }

  async settle(key: ClaimKey, receipt: ClaimReceipt): Promise<void> {
    this.#checkOpen();
    checkClaimKey(key);
    checkReceipt(receipt);
    const id = claimKeyDigest(key);
    const outcome = await this.#connection.eval(
      "claim_store_unavailable",
      SETTLE,
      [this.#connection.key("claim", id), this.#connection.key("in-doubt")],
      [JSON.stringify({ status: receipt.status, settledAt: receipt.settledAt }), id],
    );
    if (outcome === 0)
      throw new TesseraError("invalid_input", "settle: no claim exists for this key");
    // 2: already settled; the first outcome stands.
  }

  async get(key: ClaimKey): Promise<StoredClaim | undefined> {
    this.#checkOpen();
    checkClaimKey(key);
    return this.#read(claimKeyDigest(key));
  }

  async listInDoubt(session?: string): Promise<StoredClaim[]> {
    this.#checkOpen();
    if (session !== undefined && typeof session !== "string") {
      throw new TesseraError("invalid_input", "session must be a string");
    }
    // One index of every unsettled claim: it holds only claims in flight or in doubt, so a
    // per-session listing filters it rather than paying a second index on every claim.
    const index = this.#connection.key("in-doubt");
    return this.#connection.run("claim_store_unavailable", async (redis) => {
      const ids = await redis.smembers(index);
      if (ids.length === 0) return [];
      const values = await redis.mget(ids.map((id) => this.#connection.key("claim", id)));
      const inDoubt: StoredClaim[] = [];
      const stale: string[] = [];
      values.forEach((value, i) => {
        const claim = value === null ? undefined : parse(value);
        if (!claim || claim.receipt) stale.push(ids[i] as string);
        else if (session === undefined || claim.session === session) inDoubt.push(claim);
      });
      if (stale.length > 0) await redis.srem(index, ...stale);
      return inDoubt.sort((a, b) => a.claimedAt - b.claimedAt);
    });
  }

  async endSession(session: string): Promise<void> {
    this.#checkOpen();
    if (typeof session !== "string")
      throw new TesseraError("invalid_input", "session must be a string");
    const sessionId = storageDigest(session);
    await this.#connection.eval(
      "claim_store_unavailable",
      END_SESSION,
      [this.#connection.key("session", sessionId), this.#connection.key("in-doubt")],
      [this.#connection.prefix],
    );
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#onClose();
  }

  async #read(id: string): Promise<StoredClaim | undefined> {
    const value = await this.#connection.run("claim_store_unavailable", (redis) =>
      redis.get(this.#connection.key("claim", id)),
    );
    return value === null ? undefined : parse(value);
  }

  #checkOpen(): void {
    if (this.#closed)
      throw new TesseraError("claim_store_unavailable", "the claim store is closed");
  }
}

function parse(value: string): StoredClaim {
  const newline = value.indexOf("\n");
  if (newline < 0) return JSON.parse(value) as StoredClaim;
  const record = JSON.parse(value.slice(0, newline)) as StoredClaim;
  return { ...record, receipt: JSON.parse(value.slice(newline + 1)) as ClaimReceipt };
}
