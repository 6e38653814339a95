import {
  type Act,
  type ActLedger,
  type ActResult,
  type AuditEvent,
  type ClaimKey,
  type ClaimRecord,
  isTesseraError,
  TesseraError,
  type Withdrawal,
  type WithdrawResult,
} from "@tessera/core";
import {
  auditContentDigest,
  auditStreamOf,
  checkAct,
  checkVersions,
  checkWithdrawal,
  claimKeyDigest,
  deniedAnswerOf,
  serializeAnswer,
  storageDigest,
} from "@tessera/core/store-kit";
import { Batcher, type Outcome, retryDeadlock } from "./batcher.js";
import { toStoredClaim } from "./claim-store.js";
import type { Database, UnavailableCode } from "./database.js";

/** One event as `record_acts` takes it: keys by digest, content as JSON and its digest. */
interface EventParams {
  readonly streamKey: string;
  readonly callKey: string;
  readonly traceKey: string;
  /** The event's content as JSON, without chain fields: the function prepends them. */
  readonly body: string;
  /** NULL only in the exhausted slot of an act that has none: its lost spend is undone. */
  readonly digest: string | null;
  /** A denial's answer for its claim (JSON), or null when the event allows. */
  readonly answer: string | null;
  readonly settledAt: number;
}

/** An act as one row of the batch's parallel arrays. */
interface ActRequest {
  readonly claimKey: string | null;
  readonly sessionKey: string | null;
  readonly record: string | null;
  readonly claimedAt: number | null;
  readonly usageKey: string | null;
  readonly usageIds: string | null;
  readonly maxUses: number | null;
  readonly event: EventParams;
  readonly exhausted: EventParams | null;
  /** The grant versions the act was decided on, by digest: checked in its batch. */
  readonly versions: readonly { namespaceKey: string; subjectKey: string; version: string }[];
  /** Whether a result carries `used` (the act spends). */
  readonly spends: boolean;
  /** The code a failure of this act's batch is reported under, for this act's caller. */
  readonly failCode: UnavailableCode;
}

interface ResultRow {
  a_n: number;
  a_outcome: "event" | "exhausted" | "claimed" | "stale" | "lost";
  a_used: string | null;
  a_record: string | null;
  a_status: string | null;
  a_settled_at: string | null;
  a_answer: string | null;
}

const STALE: ActResult = Object.freeze({ status: "stale" });
const SPEND_LOST: ActResult = Object.freeze({ status: "spend_lost" });

const NO_EVENT: Omit<EventParams, "settledAt"> & { settledAt: null } = {
  streamKey: "",
  callKey: "",
  traceKey: "",
  body: "{}",
  digest: "",
  answer: null,
  settledAt: null,
};

/**
 * The exhausted slot of an act with a spend and no exhausted event: its NULL digest tells
 * `record_acts` (schema 10) to undo the act when its spend loses (`undoesLostSpends`).
 */
const UNDO_IF_LOST: Omit<EventParams, "settledAt"> & { settledAt: null } = Object.freeze(
  Object.assign({}, NO_EVENT, { digest: null }),
);

/**
 * The PostgreSQL act ledger: acts recorded all or nothing, one statement per batch.
 *
 * Acts that arrive while the batch before them is in flight leave together (`batcher.ts`, one
 * batch out at a time), and a batch is one call of the server-side function `record_acts`
 * (`act-function.ts`): the claims, the spends, the events linked under their streams' head
 * locks and the denials' settles, in the implicit transaction of that one statement. So an
 * act costs one round trip and one commit, shared with every act of its batch, and a failure
 * anywhere (a lock wait past `statementTimeoutMs`, a lost connection) rolls the whole batch
 * back: no claim, no spend and no event of any of its acts is left, and a retry decides anew.
 *
 * The events are linked by the server (rule v2, from the content digest this side sends), so
 * the batch needs no head on the client and no ordering between processes. The bundle's audit
 * sink remembers heads of its own: after the ledger moved one, its next append finds it stale
 * and takes its locked path once (a transaction that locks the head).
 *
 * A batch that fails is reported to each caller under the code of the first port its act
 * touches, as a composition of the ports would: `claim_store_unavailable` for an act with a
 * claim, else `usage_store_unavailable` with a spend, else `audit_unavailable`.
 */
export class PostgresActLedger implements ActLedger {
  readonly #db: Database;
  readonly #sql: string;
  /** The same with the batch's version checks: schema 8's overload. */
  readonly #checkedSql: string;
  readonly #withdrawSql: string;
  /**
   * One batch in flight, not the stores' two: the acts that arrive meanwhile wait for it and
   * leave together. A `record_acts` call costs the server about 280 µs for one act and 60 µs
   * more per act it carries, so fewer, larger batches are what a loaded server needs: the
   * service's allowed send at c=10 went from 2,227 to 2,584 requests/s in two bench runs back
   * to back (0.70× → 0.81× of its two-writes ceiling). An act alone still leaves at once; one
   * that arrives during a batch waits at most for that batch.
   */
  readonly #batches = new Batcher<ActRequest, ActResult>((batch) => this.#send(batch), 1);
  /** `record_acts` (schema 8) compares each act's grant versions with this database's. */
  readonly checksVersionsIn: object;
  /**
   * `record_acts` (schema 10) writes nothing of an act whose spend lost when it came without
   * its exhausted event, and answers `spend_lost`; its claim, inserted first in the batch, is
   * passed to the batch's next act of the same key (which then goes on as if it had found the
   * key free, as it would have one after the other) or deleted.
   */
  readonly undoesLostSpends = true;

  constructor(db: Database) {
    this.#db = db;
    this.checksVersionsIn = db.versionSpace;
    const args = `$1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[],
      $7::bigint[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[],
      $14::bigint[]`;
    this.#sql = `SELECT * FROM ${db.table("record_acts")}(${args})`;
    this.#checkedSql = `SELECT * FROM ${db.table("record_acts")}(${args},
      $15::integer[], $16::text[], $17::text[], $18::text[])`;
    this.#withdrawSql = `SELECT ${db.table("withdraw_act")}($1, $2, $3::bigint, $4, $5, $6, $7,
      $8, $9, $10, $11::bigint) AS result`;
  }

  /**
   * One call of the server-side function `withdraw_act` (`withdraw-function.ts`): the claim
   * compared and settled, the use given back and the event linked in the implicit transaction
   * of that one statement, so a failure anywhere leaves nothing of the withdrawal. Not
   * batched: withdrawals are rare (a lost reply), and each is sent again until it answers.
   */
  async withdraw(withdrawal: Withdrawal): Promise<WithdrawResult> {
    const values = withdrawValues(withdrawal);
    // Rolled back whole on a deadlock, so sending it again is safe.
    const { rows } = await retryDeadlock(() =>
      this.#db.query<{ result: string }>("claim_store_unavailable", this.#withdrawSql, values),
    );
    const result = rows[0]?.result;
    if (result === "withdrawn" || result === "not_recorded" || result === "kept") return result;
    // We cannot tell what the function did: fail closed, the caller tries again.
    throw new TesseraError("claim_store_unavailable", "withdraw_act answered something else");
  }

  /** Not `async`: the batch's own promise is returned, without a second one to adopt it. */
  record(act: Act): Promise<ActResult> {
    let request: ActRequest;
    try {
      request = toRequest(act);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#batches.submit(request);
  }

  async #send(batch: readonly ActRequest[]): Promise<Outcome<ActResult>[]> {
    // Events at n (the decision's) and at N + n (the exhausted one, or a placeholder).
    const events = [
      ...batch.map((act) => act.event),
      ...batch.map((act) => act.exhausted ?? (act.spends ? UNDO_IF_LOST : NO_EVENT)),
    ];
    const values: unknown[][] = [
      batch.map((act) => act.claimKey),
      batch.map((act) => act.sessionKey),
      batch.map((act) => act.record),
      batch.map((act) => act.claimedAt),
      batch.map((act) => act.usageKey),
      batch.map((act) => act.usageIds),
      batch.map((act) => act.maxUses),
      events.map((event) => event.streamKey),
      events.map((event) => event.callKey),
      events.map((event) => event.traceKey),
      events.map((event) => event.body),
      events.map((event) => event.digest),
      events.map((event) => event.answer),
      events.map((event) => event.settledAt),
    ];
    // A batch without version checks calls version 7's function, one with them version 8's:
    // the unchecked form is the one every schema since 4 answers, and skips the check.
    const checked = batch.some((act) => act.versions.length > 0);
    if (checked) values.push(...versionColumns(batch));
    let rows: ResultRow[];
    try {
      // The statement was rolled back whole on a deadlock, so sending it again is safe.
      ({ rows } = await retryDeadlock(() =>
        this.#db.query<ResultRow>(
          (batch[0] as ActRequest).failCode,
          checked ? this.#checkedSql : this.#sql,
          values,
          checked ? "tessera_record_acts_checked" : "tessera_record_acts",
        ),
      ));
    } catch (error) {
      // Each caller hears the failure under its own act's code (same cause, same message).
      return batch.map((act) => ({ ok: false, error: recode(error, act.failCode) }));
    }
    return batch.map((act, i) => {
      const row = rows[i];
      if (row === undefined || Number(row.a_n) !== i + 1) {
        return { ok: false, error: new Error("record_acts answered out of order") };
      }
      if (row.a_outcome === "claimed" && row.a_record === null) {
        // The holder's claim was deleted (its session ended) before the batch read it back;
        // this act wrote nothing, and a retry decides anew.
        const error = new TesseraError(act.failCode, "the claim neither inserted nor read back");
        return { ok: false, error };
      }
      return { ok: true, value: toResult(act, row) };
    });
  }
}

/** Checks the act (nothing is sent for a bad one) and lays it out for the batch's arrays. */
function toRequest(act: Act): ActRequest {
  const { event, exhausted } = checkAct(act, { checksVersions: true, undoesLostSpends: true });
  const versions = checkVersions(act).map((check) => ({
    namespaceKey: storageDigest(check.namespaceId),
    subjectKey: storageDigest(check.subject),
    version: check.version,
  }));
  const claim = act.claim;
  const spend = act.spend;
  return {
    claimKey: claim === undefined ? null : claimKeyDigest(claim.key),
    sessionKey: claim === undefined ? null : storageDigest(claim.key.session),
    record: claim === undefined ? null : recordText(claim.key, claim.record),
    claimedAt: claim === undefined ? null : claim.record.claimedAt,
    usageKey: spend === undefined ? null : storageDigest(spend.namespaceId, spend.grantId),
    usageIds: spend === undefined ? null : JSON.stringify([spend.namespaceId, spend.grantId]),
    maxUses: spend === undefined ? null : spend.maxUses,
    event: eventParams(event),
    exhausted: exhausted === undefined ? null : eventParams(exhausted),
    versions,
    spends: spend !== undefined,
    failCode:
      claim !== undefined
        ? "claim_store_unavailable"
        : spend !== undefined
          ? "usage_store_unavailable"
          : "audit_unavailable",
  };
}

/** A claim's record as stored (JSON; the claim store spells it the same way). */
function recordText(key: ClaimKey, record: ClaimRecord): string {
  return JSON.stringify({
    session: key.session,
    functionCallId: key.functionCallId,
    bodyHash: record.bodyHash,
    claimedAt: record.claimedAt,
    ...(record.worker === undefined ? {} : { worker: record.worker }),
  });
}

/**
 * A withdrawal checked (nothing is sent for a bad one: `invalid_input`) and laid out as
 * `withdraw_act`'s parameters. The receipt's instant is the withdrawal event's, as a denial's
 * settle takes its event's.
 */
function withdrawValues(withdrawal: Withdrawal): unknown[] {
  const checked = checkWithdrawal(withdrawal);
  const { act, answer } = checked;
  const event = eventParams(checked.event);
  const { claim, spend } = act;
  return [
    claimKeyDigest(claim.key),
    recordText(claim.key, claim.record),
    claim.record.claimedAt,
    spend === undefined ? null : storageDigest(spend.namespaceId, spend.grantId),
    event.streamKey,
    event.callKey,
    event.traceKey,
    event.body,
    event.digest,
    answer,
    event.settledAt,
  ];
}

function eventParams(event: AuditEvent): EventParams {
  // Only the store links: chain fields a writer passed are dropped, as `linkAuditEvent` does.
  const { seq: _seq, prev: _prev, hash: _hash, ...content } = event;
  const denied = deniedAnswerOf(event);
  return {
    streamKey: storageDigest(auditStreamOf(event)),
    callKey: storageDigest(event.callId),
    traceKey: storageDigest(event.traceId),
    body: JSON.stringify(content),
    digest: auditContentDigest(content as AuditEvent),
    answer: denied === undefined ? null : (serializeAnswer(denied) ?? null),
    settledAt: Date.parse(event.at),
  };
}

/** The batch's version checks as four parallel arrays: the act (1-based), holder, version. */
function versionColumns(batch: readonly ActRequest[]): unknown[][] {
  const acts: number[] = [];
  const namespaces: string[] = [];
  const subjects: string[] = [];
  const versions: string[] = [];
  batch.forEach((act, i) => {
    for (const check of act.versions) {
      acts.push(i + 1);
      namespaces.push(check.namespaceKey);
      subjects.push(check.subjectKey);
      versions.push(check.version);
    }
  });
  return [acts, namespaces, subjects, versions];
}

function toResult(act: ActRequest, row: ResultRow): ActResult {
  if (row.a_outcome === "stale") return STALE;
  if (row.a_outcome === "lost") return SPEND_LOST;
  if (row.a_outcome === "claimed") {
    return {
      status: "already_claimed",
      existing: toStoredClaim({
        record: row.a_record as string,
        receipt_status: row.a_status,
        settled_at: row.a_settled_at,
        answer: row.a_answer,
      }),
    };
  }
  return {
    status: "recorded",
    recorded: row.a_outcome,
    ...(act.spends ? { used: Number(row.a_used) } : {}),
  };
}

/** The batch's failure under another act's code: same message, same driver cause. */
function recode(error: unknown, code: UnavailableCode): unknown {
  if (!isTesseraError(error) || error.code === code || !error.code.endsWith("_unavailable")) {
    return error;
  }
  return new TesseraError(code, error.message, { cause: error.cause });
}
