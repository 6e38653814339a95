import {
  type ClaimKey,
  type ClaimReceipt,
  type ClaimRecord,
  type ClaimResult,
  type ClaimStore,
  claimKeyDigest,
  type StoredClaim,
  TesseraError,
} from "@tessera/core";
import { type Connection, script } from "./connection.js";
import { digest } from "./digest.js";
import { checkClaimKey, checkReceipt, checkRecord } from "./validate.js";

/**
 * A claim is one string key, `<prefix>claim:<claimKeyDigest>`, holding the JSON record; once
 * settled, a newline and the JSON receipt are appended (JSON never contains a raw newline).
 * Settling only ever appends to an existing claim (`KEEPTTL`), never creates one.
 */
const SETTLE = script(`
local value = redis.call('GET', KEYS[1])
if not value then return 0 end
redis.call('SREM', KEYS[2], ARGV[2])
redis.call('SREM', KEYS[3], ARGV[2])
if string.find(value, '\\n', 1, true) then return 2 end
redis.call('SET', KEYS[1], value .. '\\n' .. ARGV[1], 'KEEPTTL')
return 1
`);

/** Deletes every claim of a session and its index entries, as one step. */
const END_SESSION = script(`
local digests = redis.call('SMEMBERS', KEYS[1])
for _, d in ipairs(digests) do
  redis.call('DEL', ARGV[1] .. 'claim:' .. d)
  redis.call('SREM', KEYS[3], d)
end
redis.call('DEL', KEYS[1], KEYS[2])
return #digests
`);

/**
 * Claims by `SET key value NX PX ttl`, whose reply is checked to be exactly `"OK"` (won) or
 * `null` (already held); any other reply fails closed. In the same MULTI, before the SET, the
 * digest is added to the session's claim set and to the in-doubt indexes, so a worker killed
 * right after its claim still leaves the claim listed in doubt, without any SCAN. An index
 * entry whose claim is settled, expired or never created is dropped when it is next listed.
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
    const session = digest(key.session);
    const value = JSON.stringify(stored);
    for (let round = 0; round < 3; round++) {
      const replies = await this.#connection.run("claim_store_unavailable", (redis) =>
        redis
          .multi()
          .sadd(this.#connection.key("session", session), id)
          .pexpire(this.#connection.key("session", session), this.#ttlMs)
          .sadd(this.#connection.key("in-doubt", session), id)
          .pexpire(this.#connection.key("in-doubt", session), this.#ttlMs)
          .sadd(this.#connection.key("in-doubt"), id)
          .set(this.#connection.key("claim", id), value, "PX", this.#ttlMs, "NX")
          .exec(),
      );
      const reply = replies?.[5];
      if (!reply || reply[0]) {
        throw new TesseraError("claim_store_unavailable", "the claim transaction did not complete");
      }
      if (reply[1] === "OK") return { status: "claimed" };
      if (reply[1] !== null) {
        throw new TesseraError("claim_store_unavailable", "unexpected reply to SET NX");
      }
      const existing = await this.#read(id);
      if (existing) return { status: "already_claimed", existing };
      // The holder expired or its session ended between our SET and GET: try again.
    }
    throw new TesseraError("claim_store_unavailable", "the claim neither set nor read back");
  }

  async settle(key: ClaimKey, receipt: ClaimReceipt): Promise<void> {
    this.#checkOpen();
    checkClaimKey(key);
    checkReceipt(receipt);
    const id = claimKeyDigest(key);
    const session = digest(key.session);
    const outcome = await this.#connection.eval(
      "claim_store_unavailable",
      SETTLE,
      [
        this.#connection.key("claim", id),
        this.#connection.key("in-doubt", session),
        this.#connection.key("in-doubt"),
      ],
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
    const index =
      session === undefined
        ? this.#connection.key("in-doubt")
        : this.#connection.key("in-doubt", digest(session));
    return this.#connection.run("claim_store_unavailable", async (redis) => {
      const ids = await redis.smembers(index);
      if (ids.length === 0) return [];
      const values = await redis.mget(ids.map((id) => this.#connection.key("claim", id)));
      const inDoubt: StoredClaim[] = [];
      const stale: string[] = [];
      values.forEach((value, i) => {
        const claim = value === null ? undefined : parse(value);
        if (claim && !claim.receipt) inDoubt.push(claim);
        else stale.push(ids[i] as string);
      });
      if (stale.length > 0) await redis.srem(index, ...stale);
      return inDoubt.sort((a, b) => a.claimedAt - b.claimedAt);
    });
  }

  async endSession(session: string): Promise<void> {
    this.#checkOpen();
    if (typeof session !== "string")
      throw new TesseraError("invalid_input", "session must be a string");
    const sessionId = digest(session);
    await this.#connection.eval(
      "claim_store_unavailable",
      END_SESSION,
      [
        this.#connection.key("session", sessionId),
        this.#connection.key("in-doubt", sessionId),
        this.#connection.key("in-doubt"),
      ],
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
