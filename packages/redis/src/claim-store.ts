import {
  type ClaimKey,
  type ClaimReceipt,
  type ClaimRecord,
  type ClaimResult,
  type ClaimStore,
  type JsonValue,
  type StoredClaim,
  TesseraError,
} from "@tessera/core";
import {
  checkClaimKey,
  checkReceipt,
  checkRecord,
  checkSession,
  serializeAnswer,
  storageDigest,
  uniqueStorageDigest,
} from "@tessera/core/store-kit";
import { CLAIM, CLAIMS_PER_SCRIPT, SETTLE, SETTLES_PER_SCRIPT } from "./claim-scripts.js";
import type { Connection } from "./connection.js";
import { scanKeys } from "./scan-keys.js";

const CODE = "claim_store_unavailable";

interface PendingClaim {
  readonly name: string;
  readonly value: string;
  readonly resolve: (result: ClaimResult) => void;
  readonly reject: (error: unknown) => void;
}

interface PendingSettle {
  readonly name: string;
  readonly receipt: string;
  readonly resolve: () => void;
  readonly reject: (error: unknown) => void;
}

/**
 * Claims in Redis: one string key per claim, `<prefix>claim:<sha256(session)>:<sha256(id)>`,
 * holding the JSON record; once settled, a newline and the JSON receipt are appended, and,
 * when the settle carried an answer, another newline and the answer's JSON (layout version 4;
 * JSON never contains a raw newline). A claim lives `claimTtlMs`, which must cover the host
 * session.
 *
 * A claim alone in its tick is one command, `SET key record NX PX ttl GET` (Redis 7.0 or
 * later): nil means this caller set the key; a string is the holder's record, read in the same
 * atomic step, so it cannot expire or be deleted in between. Any other reply fails closed,
 * never "claimed". Claims issued in the same tick (a gate with calls in flight) leave together
 * as one `CLAIM` script that runs that SET per key: one socket write and one reply instead of
 * one per claim (the driver's writes were the largest share of a gate's CPU at 8 calls in
 * flight). A lone claim keeps the SET: a one-key script costs the server over twice its time.
 * Every key of a store is under its prefix, which on a cluster must open with a hash tag
 * (`config.ts`), so a batch lies in one slot. There is no index to keep beside it: a claim's
 * key names its session, so `endSession` and `listInDoubt` find claims with SCAN. They are
 * operator and recovery operations that walk the keyspace; the claim on every call's path
 * stays a single write.
 */
export class RedisClaimStore implements ClaimStore {
  readonly #connection: Connection;
  readonly #ttlMs: number;
  readonly #onClose: () => Promise<void>;
  #claims: PendingClaim[] = [];
  #settles: PendingSettle[] = [];
  /** A flush is due at the next tick (it sends the tick's claims, then its settles). */
  #flushing = false;
  #closed = false;

  constructor(
    connection: Connection,
    ttlMs: number,
    onClose: () => Promise<void> = async () => {},
  ) {
    this.#connection = connection;
    this.#ttlMs = ttlMs;
    this.#onClose = onClose;
    connection.beforeClose(() => {
      if (this.#flushing) this.#flush();
    });
  }

  /** The key a claim lives under (the self-test checks its TTL). */
  keyOf(key: ClaimKey): string {
    return claimKeyOf(this.#connection, key);
  }

  /**
   * Claims issued in the same tick leave together at the next one (see the class): each
   * caller still gets its own answer, as if its SET had been sent alone.
   */
  claim(key: ClaimKey, record: ClaimRecord): Promise<ClaimResult> {
    let value: string;
    try {
      this.#checkOpen();
      checkClaimKey(key);
      checkRecord(record);
      value = claimValueOf(key, record);
    } catch (error) {
      return Promise.reject(error);
    }
    const name = this.keyOf(key);
    return new Promise<ClaimResult>((resolve, reject) => {
      this.#claims.push({ name, value, resolve, reject });
      this.#scheduleFlush();
    });
  }

  /**
   * Settles issued in the same tick (the gate sends its after-reply receipts together) leave
   * as one script call; each caller still gets its own answer.
   */
  settle(key: ClaimKey, receipt: ClaimReceipt, answer?: JsonValue): Promise<void> {
    let value: string;
    try {
      this.#checkOpen();
      checkClaimKey(key);
      checkReceipt(receipt);
      value = settlementOf(receipt, answer);
    } catch (error) {
      return Promise.reject(error);
    }
    const name = this.keyOf(key);
    return new Promise<void>((resolve, reject) => {
      this.#settles.push({ name, receipt: value, resolve, reject });
      this.#scheduleFlush();
    });
  }

  #scheduleFlush(): void {
    if (this.#flushing) return;
    this.#flushing = true;
    process.nextTick(() => this.#flush());
  }

  /**
   * Sends what the tick queued: claims first, then settles, the order they had when a claim
   * was written at once and settles waited for the tick (a settle of a key claimed in the
   * same tick finds its claim). One connection keeps that order to the server.
   */
  #flush(): void {
    this.#flushing = false;
    const claims = this.#claims;
    const settles = this.#settles;
    if (claims.length > 0) {
      this.#claims = [];
      if (claims.length === 1) this.#sendClaim(claims[0] as PendingClaim);
      else {
        for (let start = 0; start < claims.length; start += CLAIMS_PER_SCRIPT) {
          this.#sendClaimBatch(claims.slice(start, start + CLAIMS_PER_SCRIPT));
        }
      }
    }
    if (settles.length > 0) {
      this.#settles = [];
      for (let start = 0; start < settles.length; start += SETTLES_PER_SCRIPT) {
        this.#sendSettleBatch(settles.slice(start, start + SETTLES_PER_SCRIPT));
      }
    }
  }

  /** A claim alone in its tick: the plain SET, cheaper for the server than a script. */
  #sendClaim(claim: PendingClaim): void {
    this.#connection
      .send(
        CODE,
        (redis): Promise<unknown> =>
          redis.set(claim.name, claim.value, "PX", this.#ttlMs, "NX", "GET"),
        toClaimResult,
      )
      .then(claim.resolve, claim.reject);
  }

  /**
   * Several claims as one `CLAIM` script: each answer is read as its SET's would be. When the
   * script fails (no answer, a refusal), every claim of the batch fails closed with it, as
   * each SET would have: none is reported claimed.
   */
  #sendClaimBatch(batch: readonly PendingClaim[]): void {
    const names: string[] = [];
    const args: (string | number)[] = [this.#ttlMs];
    for (const claim of batch) {
      names.push(claim.name);
      args.push(claim.value);
    }
    this.#connection.eval(CODE, CLAIM, names, args).then(
      (replies) => {
        batch.forEach((claim, i) => {
          let result: ClaimResult;
          try {
            // Not an array (or too short): each claim fails closed in `toClaimResult`.
            result = toClaimResult(Array.isArray(replies) ? replies[i] : undefined);
          } catch (error) {
            claim.reject(error);
            return;
          }
          claim.resolve(result);
        });
      },
      (error: unknown) => {
        for (const claim of batch) claim.reject(error);
      },
    );
  }

  #sendSettleBatch(batch: readonly PendingSettle[]): void {
    this.#connection
      .eval(
        CODE,
        SETTLE,
        batch.map((settle) => settle.name),
        batch.map((settle) => settle.receipt),
      )
      .then(
        (outcomes) => {
          batch.forEach((settle, i) => {
            const outcome = Array.isArray(outcomes) ? outcomes[i] : undefined;
            if (outcome === 1 || outcome === 2) settle.resolve();
            else if (outcome === 0)
              settle.reject(
                new TesseraError("invalid_input", "settle: no claim exists for this key"),
              );
            else settle.reject(new TesseraError(CODE, "unexpected reply to the settle script"));
          });
        },
        (error: unknown) => {
          for (const settle of batch) settle.reject(error);
        },
      );
  }

  async get(key: ClaimKey): Promise<StoredClaim | undefined> {
    this.#checkOpen();
    checkClaimKey(key);
    const value = await this.#connection.run(CODE, (redis) => redis.get(this.keyOf(key)));
    return value === null ? undefined : parseStored(value);
  }

  /** Walks the keyspace (SCAN), reading claims in batches: cost grows with the database. */
  async listInDoubt(session?: string): Promise<StoredClaim[]> {
    this.#checkOpen();
    checkSession(session, true);
    const pattern = this.#claimPattern(session);
    const inDoubt: StoredClaim[] = [];
    await this.#connection.run(CODE, async (redis) => {
      const seen = new Set<string>();
      await scanKeys(redis, pattern, async (keys) => {
        // SCAN may return a key twice; a claim deleted or expired in between reads as null.
        const fresh = keys.filter((key) => !seen.has(key));
        for (const key of fresh) seen.add(key);
        if (fresh.length === 0) return;
        for (const value of await redis.mget(fresh)) {
          if (value === null) continue;
          const claim = parseStored(value);
          if (!claim.receipt) inDoubt.push(claim);
        }
      });
    });
    return inDoubt.sort((a, b) => a.claimedAt - b.claimedAt);
  }

  /** Deletes the session's claims (SCAN for its key pattern, then UNLINK per batch). */
  async endSession(session: string): Promise<void> {
    this.#checkOpen();
    checkSession(session);
    const pattern = this.#claimPattern(session);
    await this.#connection.run(CODE, (redis) =>
      scanKeys(redis, pattern, async (keys) => {
        if (keys.length > 0) await redis.unlink(...keys);
      }),
    );
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#onClose();
  }

  /**
   * The glob matching one session's claims, or every claim. The prefix is restricted to
   * `[\w:.-]` by the URL parser and digests are hex, so nothing in it is a glob character.
   */
  #claimPattern(session?: string): string {
    return this.#connection.key("claim", session === undefined ? "*" : storageDigest(session), "*");
  }

  #checkOpen(): void {
    if (this.#closed) throw new TesseraError(CODE, "the claim store is closed");
  }
}

/** A claim record as stored (JSON.stringify leaves out an undefined `worker`). */
export function claimValueOf(key: ClaimKey, record: ClaimRecord): string {
  return JSON.stringify({
    session: key.session,
    functionCallId: key.functionCallId,
    bodyHash: record.bodyHash,
    claimedAt: record.claimedAt,
    worker: record.worker,
  } satisfies StoredClaim);
}

/**
 * What a settle appends after the record's newline: the receipt's JSON, then, when there is an
 * answer, a newline and its JSON (`serializeAnswer`: JSON-safe and bounded, else invalid_input).
 */
export function settlementOf(receipt: ClaimReceipt, answer?: JsonValue): string {
  const receiptJson = JSON.stringify({ status: receipt.status, settledAt: receipt.settledAt });
  const answerJson = serializeAnswer(answer);
  return answerJson === undefined ? receiptJson : `${receiptJson}\n${answerJson}`;
}

/** `<prefix>claim:<sha256(session)>:<sha256(id)>`: the session's digest cached, the ID's not. */
export function claimKeyOf(connection: Connection, key: ClaimKey): string {
  return connection.claimKey(storageDigest(key.session), uniqueStorageDigest(key.functionCallId));
}

function toClaimResult(reply: unknown): ClaimResult {
  if (reply === null) return { status: "claimed" };
  const existing = typeof reply === "string" ? readStoredClaim(reply) : undefined;
  if (existing) return { status: "already_claimed", existing };
  // We cannot tell who holds the key: fail closed, never "claimed".
  throw new TesseraError(CODE, "unexpected reply to SET NX GET");
}

/** A stored claim, or a fail-closed error when the value is not one (never a silent miss). */
function parseStored(value: string): StoredClaim {
  const claim = readStoredClaim(value);
  if (!claim) throw new TesseraError(CODE, "a stored claim is unreadable");
  return claim;
}

/** The claim a key holds, or undefined when the value is not one. */
export function readStoredClaim(value: string): StoredClaim | undefined {
  try {
    const newline = value.indexOf("\n");
    const record = JSON.parse(newline < 0 ? value : value.slice(0, newline)) as unknown;
    if (
      typeof record !== "object" ||
      record === null ||
      !("session" in record) ||
      typeof record.session !== "string" ||
      !("functionCallId" in record) ||
      typeof record.functionCallId !== "string"
    ) {
      return undefined;
    }
    if (newline < 0) return record as StoredClaim;
    // Layout 3 and earlier: record, receipt. Layout 4 may add the answer on a third line.
    const second = value.indexOf("\n", newline + 1);
    const receipt = JSON.parse(
      second < 0 ? value.slice(newline + 1) : value.slice(newline + 1, second),
    ) as ClaimReceipt;
    // The parsed record is this call's own: fields are set on it, not spread into a copy.
    if (second < 0) return Object.assign(record as StoredClaim, { receipt });
    return Object.assign(record as StoredClaim, {
      receipt,
      answer: JSON.parse(value.slice(second + 1)) as JsonValue,
    });
  } catch {
    return undefined;
  }
}
