import {
  type ClaimKey,
  type ClaimReceipt,
  type ClaimRecord,
  type ClaimResult,
  type ClaimStore,
  type StoredClaim,
  TesseraError,
} from "@tessera/core";
import {
  checkClaimKey,
  checkReceipt,
  checkRecord,
  checkSession,
  claimKeyDigest,
  storageDigest,
} from "@tessera/core/store-kit";
import type { Database } from "./database.js";

interface ClaimRow {
  record: string;
  receipt_status: string | null;
  settled_at: string | null;
}

/**
 * Claims as rows keyed by `claimKeyDigest`. The claim is `INSERT … ON CONFLICT DO NOTHING
 * RETURNING` on the primary key: the row that comes back is the proof this caller won; no
 * row means another caller already holds the key, and its record is returned. The conflict
 * target is left implicit on purpose: were the primary key ever dropped, inserts would
 * succeed twice and the self-test would refuse the store, instead of an error that looks
 * like an outage.
 */
export class PostgresClaimStore implements ClaimStore {
  readonly #db: Database;
  readonly #onClose: () => Promise<void>;
  readonly #sql: Record<"claim" | "get" | "settle" | "inDoubt" | "inDoubtAll" | "end", string>;
  #closed = false;

  constructor(db: Database, onClose: () => Promise<void> = async () => {}) {
    this.#db = db;
    this.#onClose = onClose;
    const claims = db.table("claims");
    const columns = "record, receipt_status, settled_at";
    this.#sql = {
      claim: `INSERT INTO ${claims} (key, session_key, record, claimed_at) VALUES ($1, $2, $3, $4)
        ON CONFLICT DO NOTHING RETURNING key`,
      get: `SELECT ${columns} FROM ${claims} WHERE key = $1`,
      settle: `UPDATE ${claims} SET receipt_status = $2, settled_at = $3
        WHERE key = $1 AND receipt_status IS NULL RETURNING key`,
      inDoubt: `SELECT ${columns} FROM ${claims}
        WHERE receipt_status IS NULL AND session_key = $1 ORDER BY claimed_at, key`,
      inDoubtAll: `SELECT ${columns} FROM ${claims} WHERE receipt_status IS NULL ORDER BY claimed_at, key`,
      end: `DELETE FROM ${claims} WHERE session_key = $1`,
    };
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
    // A conflicting row can vanish between the insert and the read (endSession racing us);
    // then the insert is simply tried again. Three rounds without an answer fail closed.
    for (let round = 0; round < 3; round++) {
      const inserted = await this.#db.query("claim_store_unavailable", this.#sql.claim, [
        id,
        storageDigest(key.session),
        JSON.stringify(stored),
        record.claimedAt,
      ]);
      if (inserted.rowCount === 1) return { status: "claimed" };
      const existing = await this.#read(id);
      if (existing) return { status: "already_claimed", existing };
    }
    throw new TesseraError("claim_store_unavailable", "the claim neither inserted nor read back");
  }

  async settle(key: ClaimKey, receipt: ClaimReceipt): Promise<void> {
    this.#checkOpen();
    checkClaimKey(key);
    checkReceipt(receipt);
    const id = claimKeyDigest(key);
    const updated = await this.#db.query("claim_store_unavailable", this.#sql.settle, [
      id,
      receipt.status,
      receipt.settledAt,
    ]);
    if (updated.rowCount === 1) return;
    // Settling twice keeps the first outcome (an outcome is a fact, not a setting); settling
    // a key that was never claimed is a caller bug and is said so.
    if (!(await this.#read(id))) {
      throw new TesseraError("invalid_input", "settle: no claim exists for this key");
    }
  }

  async get(key: ClaimKey): Promise<StoredClaim | undefined> {
    this.#checkOpen();
    checkClaimKey(key);
    return this.#read(claimKeyDigest(key));
  }

  async listInDoubt(session?: string): Promise<StoredClaim[]> {
    this.#checkOpen();
    checkSession(session, true);
    const { rows } =
      session === undefined
        ? await this.#db.query<ClaimRow>("claim_store_unavailable", this.#sql.inDoubtAll)
        : await this.#db.query<ClaimRow>("claim_store_unavailable", this.#sql.inDoubt, [
            storageDigest(session),
          ]);
    return rows.map(toStoredClaim);
  }

  async endSession(session: string): Promise<void> {
    this.#checkOpen();
    checkSession(session);
    await this.#db.query("claim_store_unavailable", this.#sql.end, [storageDigest(session)]);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#onClose();
  }

  async #read(id: string): Promise<StoredClaim | undefined> {
    const { rows } = await this.#db.query<ClaimRow>("claim_store_unavailable", this.#sql.get, [id]);
    return rows[0] ? toStoredClaim(rows[0]) : undefined;
  }

  #checkOpen(): void {
    if (this.#closed)
      throw new TesseraError("claim_store_unavailable", "the claim store is closed");
  }
}

function toStoredClaim(row: ClaimRow): StoredClaim {
  const record = JSON.parse(row.record) as StoredClaim;
  if (row.receipt_status === null || row.settled_at === null) return record;
  return {
    ...record,
    receipt: {
      status: row.receipt_status as ClaimReceipt["status"],
      settledAt: Number(row.settled_at),
    },
  };
}
