import type {
  ClaimKey,
  ClaimReceipt,
  ClaimRecord,
  ClaimResult,
  ClaimStore,
  JsonValue,
  StoredClaim,
} from "@tessera/core";
import { TesseraError } from "@tessera/core";
import {
  checkClaimKey,
  checkReceipt,
  checkRecord,
  checkSession,
  serializeAnswer,
} from "@tessera/core/store-kit";
import { inDoubtRows, insertOrRead, readClaim, settleRow } from "./claim-rows.js";
import type { SqliteDatabase } from "./database.js";

const CODE = "claim_store_unavailable";

/**
 * Claims keyed by (session, functionCallId): a claim is one `INSERT … ON CONFLICT DO
 * NOTHING`, won when it changed a row; on conflict the existing row is read back for the
 * caller. Both parts are bound as parameters and compared by SQLite as whole strings, so no
 * input can collide with another or reach the SQL. A claim without a receipt is in doubt.
 * Claims, settles and session ends issued together share one commit (`group-commit.ts`).
 */
export class SqliteClaimStore implements ClaimStore {
  readonly #db: SqliteDatabase;
  readonly #release: (() => void | Promise<void>) | undefined;
  #closed = false;

  /** `release` is called by `close()` when this store owns its connection. */
  constructor(db: SqliteDatabase, release?: () => void | Promise<void>) {
    this.#db = db;
    this.#release = release;
  }

  /**
   * Shares its commit with the other writes issued in the same tick (`group-commit.ts`).
   * Not `async`: the queue's own promise is returned as it is (see the usage store).
   */
  claim(key: ClaimKey, record: ClaimRecord): Promise<ClaimResult> {
    try {
      checkClaimKey(key);
      checkRecord(record);
      return this.#write(() => insertOrRead(this.#db, key, record));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** Synchronous core, also used by the self-test inside a rolled-back transaction. */
  claimNow(key: ClaimKey, record: ClaimRecord): ClaimResult {
    checkClaimKey(key);
    checkRecord(record);
    return this.#run(() => insertOrRead(this.#db, key, record));
  }

  /** Receipt and answer in one UPDATE of an unsettled claim: the first settle stands whole. */
  async settle(key: ClaimKey, receipt: ClaimReceipt, answer?: JsonValue): Promise<void> {
    checkClaimKey(key);
    checkReceipt(receipt);
    const text = serializeAnswer(answer);
    await this.#write(() => {
      // Refused having written nothing, so the rest of its batch still commits.
      if (!settleRow(this.#db, key, receipt, text) && !readClaim(this.#db, key)) {
        throw new TesseraError("invalid_input", "settle: no such claim");
      }
    }, false);
  }

  async get(key: ClaimKey): Promise<StoredClaim | undefined> {
    checkClaimKey(key);
    return this.#run(() => readClaim(this.#db, key));
  }

  async listInDoubt(session?: string): Promise<StoredClaim[]> {
    checkSession(session, true);
    return this.#run(() => inDoubtRows(this.#db, session));
  }

  async endSession(session: string): Promise<void> {
    checkSession(session);
    await this.#write(() => {
      this.#db.statement("DELETE FROM tessera_claims WHERE session = ?").run(session);
    });
  }

  async close(): Promise<void> {
    this.#closed = true;
    await this.#release?.();
  }

  #run<T>(work: () => T): T {
    if (this.#closed) throw new TesseraError(CODE, "the claim store is closed");
    return this.#db.run(CODE, work);
  }

  /**
   * `flush = false` for a receipt only: its commit needs no fsync of its own, since a receipt
   * lost with the machine reads `in_doubt`, the truth (`group-commit.ts`).
   */
  #write<T>(work: () => T, flush = true): Promise<T> {
    if (this.#closed) throw new TesseraError(CODE, "the claim store is closed");
    return this.#db.write(CODE, work, flush);
  }
}
