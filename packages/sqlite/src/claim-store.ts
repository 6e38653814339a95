import {
  type ClaimKey,
  type ClaimReceipt,
  type ClaimRecord,
  type ClaimResult,
  type ClaimStore,
  type StoredClaim,
  TesseraError,
} from "@tessera/core";
import { checkClaimKey, checkReceipt, checkRecord, checkSession } from "@tessera/core/store-kit";
import type { SqliteDatabase } from "./database.js";

const CODE = "claim_store_unavailable";
const COLUMNS =
  "session, function_call_id, body_hash, claimed_at, worker, receipt_status, settled_at";

interface ClaimRow {
  session: string;
  function_call_id: string;
  body_hash: string;
  claimed_at: number;
  worker: string | null;
  receipt_status: ClaimReceipt["status"] | null;
  settled_at: number | null;
}

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
      return this.#write(() => this.#insertOrRead(key, record));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** Synchronous core, also used by the self-test inside a rolled-back transaction. */
  claimNow(key: ClaimKey, record: ClaimRecord): ClaimResult {
    checkClaimKey(key);
    checkRecord(record);
    return this.#run(() => this.#insertOrRead(key, record));
  }

  async settle(key: ClaimKey, receipt: ClaimReceipt): Promise<void> {
    checkClaimKey(key);
    checkReceipt(receipt);
    await this.#write(() => {
      // Only an unsettled claim takes an outcome: the first outcome stands.
      const { changes } = this.#db
        .statement(
          `UPDATE tessera_claims SET receipt_status = ?, settled_at = ?
           WHERE session = ? AND function_call_id = ? AND receipt_status IS NULL`,
        )
        .run(receipt.status, receipt.settledAt, key.session, key.functionCallId);
      // Refused having written nothing, so the rest of its batch still commits.
      if (changes === 0 && !this.#read(key)) {
        throw new TesseraError("invalid_input", "settle: no such claim");
      }
    }, false);
  }

  async get(key: ClaimKey): Promise<StoredClaim | undefined> {
    checkClaimKey(key);
    return this.#run(() => this.#read(key));
  }

  async listInDoubt(session?: string): Promise<StoredClaim[]> {
    checkSession(session, true);
    return this.#run(() => {
      const rows = (
        session === undefined
          ? this.#db
              .statement(
                `SELECT ${COLUMNS} FROM tessera_claims WHERE receipt_status IS NULL ORDER BY claimed_at, session, function_call_id`,
              )
              .all()
          : this.#db
              .statement(
                `SELECT ${COLUMNS} FROM tessera_claims WHERE session = ? AND receipt_status IS NULL ORDER BY claimed_at, session, function_call_id`,
              )
              .all(session)
      ) as ClaimRow[];
      return rows.map(toStoredClaim);
    });
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

  #insertOrRead(key: ClaimKey, record: ClaimRecord): ClaimResult {
    // A row deleted by a concurrent endSession between our insert and our read is retried;
    // the host never reuses an ended session, so this is bounded in practice.
    for (let attempt = 0; attempt < 3; attempt++) {
      const inserted = this.#db
        .statement(
          `INSERT INTO tessera_claims (session, function_call_id, body_hash, claimed_at, worker)
           VALUES (?, ?, ?, ?, ?) ON CONFLICT (session, function_call_id) DO NOTHING`,
        )
        .run(
          key.session,
          key.functionCallId,
          record.bodyHash,
          record.claimedAt,
          record.worker ?? null,
        );
      if (inserted.changes === 1) return { status: "claimed" };
      const existing = this.#read(key);
      if (existing) return { status: "already_claimed", existing };
    }
    throw new TesseraError(CODE, "the claim kept disappearing while it was being read");
  }

  #read(key: ClaimKey): StoredClaim | undefined {
    const row = this.#db
      .statement(`SELECT ${COLUMNS} FROM tessera_claims WHERE session = ? AND function_call_id = ?`)
      .get(key.session, key.functionCallId) as ClaimRow | undefined;
    return row ? toStoredClaim(row) : undefined;
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

function toStoredClaim(row: ClaimRow): StoredClaim {
  return {
    session: row.session,
    functionCallId: row.function_call_id,
    bodyHash: row.body_hash,
    claimedAt: row.claimed_at,
    ...(row.worker === null ? {} : { worker: row.worker }),
    ...(row.receipt_status === null
      ? {}
      : { receipt: { status: row.receipt_status, settledAt: row.settled_at ?? 0 } }),
  };
}
