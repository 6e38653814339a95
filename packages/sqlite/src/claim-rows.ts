import {
  type ClaimKey,
  type ClaimReceipt,
  type ClaimRecord,
  type ClaimResult,
  type JsonValue,
  type StoredClaim,
  TesseraError,
} from "@tessera/core";
import type { SqliteDatabase } from "./database.js";

/**
 * The claim rows' statements, synchronous, shared by the claim store (one write of its own
 * per call) and the act ledger (the claim as the first write of an act's transaction). They
 * run under whatever transaction the caller holds; none of them opens one.
 */

const COLUMNS =
  "session, function_call_id, body_hash, claimed_at, worker, receipt_status, settled_at, answer";
const SELECT = `SELECT ${COLUMNS} FROM tessera_claims`;
const INSERT = `INSERT INTO tessera_claims (session, function_call_id, body_hash, claimed_at, worker)
  VALUES (?, ?, ?, ?, ?) ON CONFLICT (session, function_call_id) DO NOTHING`;
/** Only an unsettled claim takes an outcome: the first outcome stands, answer included. */
const SETTLE = `UPDATE tessera_claims SET receipt_status = ?, settled_at = ?, answer = ?
  WHERE session = ? AND function_call_id = ? AND receipt_status IS NULL`;

interface ClaimRow {
  session: string;
  function_call_id: string;
  body_hash: string;
  claimed_at: number;
  worker: string | null;
  receipt_status: ClaimReceipt["status"] | null;
  settled_at: number | null;
  answer: string | null;
}

/** Insert-if-absent; on conflict the existing claim (receipt and answer included). */
export function insertOrRead(db: SqliteDatabase, key: ClaimKey, record: ClaimRecord): ClaimResult {
  // A row deleted by a concurrent endSession between our insert and our read is retried;
  // the host never reuses an ended session, so this is bounded in practice.
  for (let attempt = 0; attempt < 3; attempt++) {
    const inserted = db
      .statement(INSERT)
      .run(
        key.session,
        key.functionCallId,
        record.bodyHash,
        record.claimedAt,
        record.worker ?? null,
      );
    if (inserted.changes === 1) return CLAIMED;
    const existing = readClaim(db, key);
    if (existing) return { status: "already_claimed", existing };
  }
  throw new TesseraError(
    "claim_store_unavailable",
    "the claim kept disappearing while it was being read",
  );
}

export function readClaim(db: SqliteDatabase, key: ClaimKey): StoredClaim | undefined {
  const row = db
    .statement(`${SELECT} WHERE session = ? AND function_call_id = ?`)
    .get(key.session, key.functionCallId) as ClaimRow | undefined;
  return row ? toStoredClaim(row) : undefined;
}

/**
 * Settles an unsettled claim with its receipt and answer (JSON text, already checked by
 * `serializeAnswer`). Returns whether it took: false when the claim was settled already (the
 * first outcome stands) or is not there.
 */
export function settleRow(
  db: SqliteDatabase,
  key: ClaimKey,
  receipt: ClaimReceipt,
  answer: string | undefined,
): boolean {
  const { changes } = db
    .statement(SETTLE)
    .run(receipt.status, receipt.settledAt, answer ?? null, key.session, key.functionCallId);
  return changes === 1;
}

/** Claims never settled, oldest first; of one session when given. */
export function inDoubtRows(db: SqliteDatabase, session: string | undefined): StoredClaim[] {
  const order = "ORDER BY claimed_at, session, function_call_id";
  const rows = (
    session === undefined
      ? db.statement(`${SELECT} WHERE receipt_status IS NULL ${order}`).all()
      : db.statement(`${SELECT} WHERE session = ? AND receipt_status IS NULL ${order}`).all(session)
  ) as ClaimRow[];
  return rows.map(toStoredClaim);
}

const CLAIMED: ClaimResult = Object.freeze({ status: "claimed" });

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
    ...(row.answer === null ? {} : { answer: JSON.parse(row.answer) as JsonValue }),
  };
}
