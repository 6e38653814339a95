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
  claimKeyDigest,
  serializeAnswer,
  storageDigest,
} from "@tessera/core/store-kit";
import { Batcher, groupBy, type Outcome, retryDeadlock } from "./batcher.js";
import type { Database } from "./database.js";

const CODE = "claim_store_unavailable";
/** `SET LOCAL synchronous_commit TO OFF` as an expression, true, inside the statement. */
const RECEIPT_COMMIT = "set_config('synchronous_commit', 'off', true) IS NOT NULL";

const SETTLED: Outcome<void> = Object.freeze({ ok: true, value: undefined });

interface ClaimRequest {
  readonly id: string;
  readonly sessionKey: string;
  readonly stored: StoredClaim;
}

interface SettleRequest {
  readonly id: string;
  readonly receipt: ClaimReceipt;
  /** The answer as JSON text, or null without one. */
  readonly answer: string | null;
}

/** A claim's row as read: the record JSON, the receipt's columns and the answer's JSON. */
interface ClaimRow {
  record: string;
  receipt_status: string | null;
  settled_at: string | null;
  answer: string | null;
}

/**
 * Claims as rows keyed by `claimKeyDigest`. The claim is `INSERT … ON CONFLICT DO NOTHING
 * RETURNING` on the primary key: the row that comes back is the proof this caller won; no
 * row means another caller already holds the key, and its record is returned. The conflict
 * target is left implicit on purpose: were the primary key ever dropped, inserts would
 * succeed twice and the self-test would refuse the store, instead of an error that looks
 * like an outage.
 *
 * Claims and settles that arrive while earlier ones are in flight are sent together, one
 * statement per batch (`batcher.ts`); each caller still gets its own exact answer.
 */
export class PostgresClaimStore implements ClaimStore {
  readonly #db: Database;
  readonly #onClose: () => Promise<void>;
  readonly #sql: Record<
    | "claim"
    | "claimMany"
    | "get"
    | "getMany"
    | "settle"
    | "settleMany"
    | "inDoubt"
    | "inDoubtAll"
    | "end",
    string
  >;
  readonly #claims = new Batcher<ClaimRequest, ClaimResult>((batch) => this.#claimBatch(batch));
  readonly #settles = new Batcher<SettleRequest, void>((batch) => this.#settleBatch(batch));
  #closed = false;

  constructor(db: Database, onClose: () => Promise<void> = async () => {}) {
    this.#db = db;
    this.#onClose = onClose;
    const claims = db.table("claims");
    const columns = "record, receipt_status, settled_at, answer";
    this.#sql = {
      claim: `INSERT INTO ${claims} (key, session_key, record, claimed_at) VALUES ($1, $2, $3, $4)
        ON CONFLICT DO NOTHING RETURNING key`,
      // Keys arrive sorted and distinct: two batches inserting the same keys take their
      // locks in the same order, so they cannot deadlock each other.
      claimMany: `INSERT INTO ${claims} (key, session_key, record, claimed_at)
        SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[])
        ON CONFLICT DO NOTHING RETURNING key`,
      get: `SELECT ${columns} FROM ${claims} WHERE key = $1`,
      getMany: `SELECT key, ${columns} FROM ${claims} WHERE key = ANY($1::text[])`,
      // A receipt needs no flush of its own: lost with the server, its claim reads in_doubt,
      // which is the truth, and the next flushed commit on the WAL carries it to disk. So the
      // statement turns synchronous_commit off for its own (implicit) transaction only; the
      // setting is evaluated on every row it changes, so a commit that wrote anything has it.
      // The answer rides with the receipt: the first settle stands, answer included.
      settleMany: `UPDATE ${claims} AS c
        SET receipt_status = r.status, settled_at = r.at, answer = r.answer
        FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[]) AS r(key, status, at, answer)
        WHERE c.key = r.key AND c.receipt_status IS NULL AND ${RECEIPT_COMMIT} RETURNING c.key`,
      settle: `UPDATE ${claims} SET receipt_status = $2, settled_at = $3, answer = $4
        WHERE key = $1 AND receipt_status IS NULL AND ${RECEIPT_COMMIT} RETURNING key`,
      inDoubt: `SELECT ${columns} FROM ${claims}
        WHERE receipt_status IS NULL AND session_key = $1 ORDER BY claimed_at, key`,
      inDoubtAll: `SELECT ${columns} FROM ${claims} WHERE receipt_status IS NULL ORDER BY claimed_at, key`,
      end: `DELETE FROM ${claims} WHERE session_key = $1`,
    };
  }

  /** Not `async`: the batch's own promise is returned, without a second one to adopt it. */
  claim(key: ClaimKey, record: ClaimRecord): Promise<ClaimResult> {
    try {
      this.#checkOpen();
      checkClaimKey(key);
      checkRecord(record);
    } catch (error) {
      return Promise.reject(error);
    }
    const stored: StoredClaim = {
      session: key.session,
      functionCallId: key.functionCallId,
      bodyHash: record.bodyHash,
      claimedAt: record.claimedAt,
      ...(record.worker === undefined ? {} : { worker: record.worker }),
    };
    return this.#claims.submit({
      id: claimKeyDigest(key),
      sessionKey: storageDigest(key.session),
      stored,
    });
  }

  async settle(key: ClaimKey, receipt: ClaimReceipt, answer?: JsonValue): Promise<void> {
    this.#checkOpen();
    checkClaimKey(key);
    checkReceipt(receipt);
    const text = serializeAnswer(answer) ?? null;
    await this.#settles.submit({ id: claimKeyDigest(key), receipt, answer: text });
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

  /**
   * One batch of claims. A single claim is the single-row statement, as before batching;
   * several are one `INSERT … SELECT FROM unnest(…) ON CONFLICT DO NOTHING RETURNING`,
   * each distinct key sent once: the first caller of a key wins if the row went in, later
   * callers of the same key get the winner's record as `already_claimed`, as they would
   * one after another. Keys that lost to a row already there are read back in one query;
   * a row deleted in between (endSession racing) is inserted again, at most three rounds.
   */
  async #claimBatch(batch: readonly ClaimRequest[]): Promise<Outcome<ClaimResult>[]> {
    const groups = groupBy(batch, (request) => request.id);
    const outcomes: Outcome<ClaimResult>[] = new Array(batch.length);
    let pending = [...groups.keys()].sort();
    for (let round = 0; round < 3 && pending.length > 0; round++) {
      const firsts = pending.map(
        (id) => batch[(groups.get(id) as number[])[0] as number] as ClaimRequest,
      );
      const won = await this.#insert(firsts);
      const lost = pending.filter((id) => !won.has(id));
      const existing =
        lost.length > 0 ? await this.#readMany(lost) : new Map<string, StoredClaim>();
      for (const id of pending) {
        const [first, ...later] = groups.get(id) as number[];
        const holder = won.has(id)
          ? (batch[first as number] as ClaimRequest).stored
          : existing.get(id);
        if (!holder) continue;
        if (won.has(id)) outcomes[first as number] = { ok: true, value: { status: "claimed" } };
        else
          outcomes[first as number] = {
            ok: true,
            value: { status: "already_claimed", existing: holder },
          };
        for (const i of later)
          outcomes[i] = { ok: true, value: { status: "already_claimed", existing: holder } };
      }
      pending = pending.filter((id) => !won.has(id) && !existing.has(id));
    }
    if (pending.length === 0) return outcomes;
    // Built only when needed: an error captures a stack, which costs more than the claim's
    // own work on the client.
    const failed = {
      ok: false,
      error: new TesseraError(CODE, "the claim neither inserted nor read back"),
    } as const;
    for (const id of pending) for (const i of groups.get(id) as number[]) outcomes[i] = failed;
    return outcomes;
  }

  async #insert(requests: readonly ClaimRequest[]): Promise<Set<string>> {
    const won = new Set<string>();
    if (requests.length === 1) {
      const [{ id, sessionKey, stored }] = requests as [ClaimRequest];
      const inserted = await this.#db.query(CODE, this.#sql.claim, [
        id,
        sessionKey,
        JSON.stringify(stored),
        stored.claimedAt,
      ]);
      if (inserted.rowCount === 1) won.add(id);
      return won;
    }
    const values = [
      requests.map((request) => request.id),
      requests.map((request) => request.sessionKey),
      requests.map((request) => JSON.stringify(request.stored)),
      requests.map((request) => request.stored.claimedAt),
    ];
    const { rows } = await retryDeadlock(() =>
      this.#db.query<{ key: string }>(CODE, this.#sql.claimMany, values),
    );
    for (const row of rows) won.add(row.key);
    return won;
  }

  /**
   * One batch of settles: the first outcome per key stands (a later settle of the same key,
   * in this batch or after, changes nothing), and a key with no claim at all is refused with
   * `invalid_input` for its callers only.
   */
  async #settleBatch(batch: readonly SettleRequest[]): Promise<Outcome<void>[]> {
    const groups = groupBy(batch, (request) => request.id);
    const ids = [...groups.keys()].sort();
    const firsts = ids.map(
      (id) => batch[(groups.get(id) as number[])[0] as number] as SettleRequest,
    );
    let settled: Set<string>;
    if (firsts.length === 1) {
      const [{ id, receipt, answer }] = firsts as [SettleRequest];
      const updated = await this.#db.query(CODE, this.#sql.settle, [
        id,
        receipt.status,
        receipt.settledAt,
        answer,
      ]);
      settled = new Set(updated.rowCount === 1 ? [id] : []);
    } else {
      const { rows } = await retryDeadlock(() =>
        this.#db.query<{ key: string }>(CODE, this.#sql.settleMany, [
          ids,
          firsts.map((request) => request.receipt.status),
          firsts.map((request) => request.receipt.settledAt),
          firsts.map((request) => request.answer),
        ]),
      );
      settled = new Set(rows.map((row) => row.key));
    }
    const unsettled = ids.filter((id) => !settled.has(id));
    const known =
      unsettled.length > 0 ? await this.#readMany(unsettled) : new Map<string, StoredClaim>();
    if (unsettled.length === 0) return batch.map(() => SETTLED);
    const missing = {
      ok: false,
      error: new TesseraError("invalid_input", "settle: no claim exists for this key"),
    } as const;
    return batch.map((request) =>
      settled.has(request.id) || known.has(request.id) ? SETTLED : missing,
    );
  }

  async #readMany(ids: readonly string[]): Promise<Map<string, StoredClaim>> {
    const { rows } = await this.#db.query<ClaimRow & { key: string }>(CODE, this.#sql.getMany, [
      ids,
    ]);
    return new Map(rows.map((row) => [row.key, toStoredClaim(row)]));
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

/**
 * A claim as its row stands: the record, the receipt once settled, and the answer when it was
 * settled with one (rows written before schema version 4 have none).
 */
export function toStoredClaim(row: ClaimRow): StoredClaim {
  const record = JSON.parse(row.record) as StoredClaim;
  if (row.receipt_status === null || row.settled_at === null) return record;
  // The parsed record is this call's own: fields are set on it, not spread into a copy.
  return Object.assign(
    record,
    {
      receipt: {
        status: row.receipt_status as ClaimReceipt["status"],
        settledAt: Number(row.settled_at),
      },
    },
    row.answer === null ? {} : { answer: JSON.parse(row.answer) as JsonValue },
  );
}
