import {
  type Act,
  type ActLedger,
  type ActResult,
  type AuditEvent,
  isTesseraError,
  TesseraError,
  type Withdrawal,
  type WithdrawResult,
} from "@tessera/core";
import { checkAct, checkVersions, checkWithdrawal, deniedAnswerOf } from "@tessera/core/store-kit";
import { type AuditChainWriter, chainOf } from "./audit-link.js";
import { insertOrRead, readClaim, settleRow } from "./claim-rows.js";
import type { SqliteDatabase } from "./database.js";
import { unavailable } from "./unavailable.js";
import { consumeRow, releaseRow } from "./usage-store.js";

const CODE = "store_unavailable";
const STALE: ActResult = Object.freeze({ status: "stale" });
const SPEND_LOST: ActResult = Object.freeze({ status: "spend_lost" });
/** A holder's grant version as the grant store hands it out ("0": never held a grant). */
const VERSION_SQL =
  "SELECT salt || '.' || bumps FROM tessera_grant_versions WHERE namespace_id = ? AND subject = ?";

/**
 * The act ledger on SQLite: an act's claim, spend, event and (for a denial) receipt are
 * statements of one `BEGIN IMMEDIATE … COMMIT`, so a fault anywhere leaves all of it or none.
 *
 * Acts issued in the same tick share that transaction with each other and with the
 * connection's other writes (`group-commit.ts`, always queued: `writeBatched`): one commit,
 * one fsync at `synchronous=FULL`, per batch, however many acts it holds. The statements of
 * one act run back to back under the write lock, so the second claim of a call ID sees the
 * first one's row, a spend sees every use spent before it, and each event is linked after
 * the head its predecessor left (`audit-link.ts`). An act alone opens its own BEGIN
 * IMMEDIATE: still one commit.
 *
 * Nothing of an act is written before its last check: `checkAct` runs first, and after the
 * first statement only a driver error can be thrown, which rolls back the whole batch. Any
 * other error there is turned into `store_unavailable` for the same reason, rather than be
 * kept as one caller's refusal while the rest of the batch (half of this act) commits.
 *
 * `withdraw` is the same kind of write: its statements (the claim read and settled `failed`
 * with the answer, the use given back never below zero, the event linked into its chain) run
 * back to back in one transaction, shared with the tick's other writes like an act's.
 */
export class SqliteActLedger implements ActLedger {
  /** Each act's grant versions are compared with this database's under the write lock. */
  readonly checksVersionsIn: object;
  /** A spend without its `exhausted` event that loses leaves its act unwritten (`#write`). */
  readonly undoesLostSpends = true;
  readonly #db: SqliteDatabase;
  readonly #chain: AuditChainWriter;

  constructor(db: SqliteDatabase) {
    this.#db = db;
    this.#chain = chainOf(db);
    this.checksVersionsIn = db.versionSpace;
  }

  /** Not `async`: the batch's own promise is returned as it is (see the usage store). */
  record(act: Act): Promise<ActResult> {
    let checked: ReturnType<typeof checkAct>;
    let versions: ReturnType<typeof checkVersions>;
    try {
      checked = checkAct(act, { checksVersions: true, undoesLostSpends: true });
      versions = checkVersions(act);
    } catch (error) {
      return Promise.reject(error);
    }
    const { event, exhausted } = checked;
    return this.#db.writeBatched(CODE, () =>
      this.#db.inTransaction
        ? this.#write(act, event, exhausted, versions)
        : this.#db.batch(() => this.#write(act, event, exhausted, versions)),
    );
  }

  /** Not `async`, like `record`: the input is checked before the batch is joined. */
  withdraw(withdrawal: Withdrawal): Promise<WithdrawResult> {
    let checked: { event: AuditEvent; answer: string };
    try {
      checked = checkedWithdrawal(withdrawal);
    } catch (error) {
      return Promise.reject(error);
    }
    const { event, answer } = checked;
    const { act } = withdrawal;
    return this.#db.writeBatched(CODE, () =>
      this.#db.inTransaction
        ? this.#withdraw(act, event, answer)
        : this.#db.batch(() => this.#withdraw(act, event, answer)),
    );
  }

  /** The withdrawal's statements, under the caller's write lock; nothing written unless it applies. */
  #withdraw(act: Withdrawal["act"], event: AuditEvent, answer: string): WithdrawResult {
    try {
      const { key, record } = act.claim;
      const stored = readClaim(this.#db, key);
      if (stored === undefined) return "not_recorded";
      const same =
        stored.bodyHash === record.bodyHash &&
        stored.claimedAt === record.claimedAt &&
        stored.worker === (record.worker ?? undefined);
      // Settled (answered, refused, or withdrawn already) or another act's claim: kept.
      if (stored.receipt !== undefined || !same) return "kept";
      const receipt = { status: "failed", settledAt: Date.parse(event.at) } as const;
      settleRow(this.#db, key, receipt, answer);
      if (act.spend !== undefined) releaseRow(this.#db, act.spend.namespaceId, act.spend.grantId);
      this.#chain.append(event);
      return "withdrawn";
    } catch (error) {
      if (isTesseraError(error) && error.code.endsWith("_unavailable")) throw error;
      if (isTesseraError(error)) {
        throw new TesseraError(CODE, "the act could not be withdrawn whole", { cause: error });
      }
      throw unavailable(CODE, error);
    }
  }

  /**
   * An act whose spend has no `exhausted` event: written only if the spend wins. Under the
   * write lock the claim is read first (taken: nothing written), then the use spent (lost:
   * nothing written, `spend_lost`), then the claim inserted and the event linked, as `#write`
   * does with its other acts.
   */
  #spendOrNothing(act: Act, event: AuditEvent): ActResult {
    if (act.claim !== undefined) {
      const existing = readClaim(this.#db, act.claim.key);
      if (existing !== undefined) return { status: "already_claimed", existing };
    }
    const { namespaceId, grantId, maxUses } = act.spend as NonNullable<Act["spend"]>;
    const spent = consumeRow(this.#db, namespaceId, grantId, maxUses);
    if (!spent.consumed) return SPEND_LOST;
    if (act.claim !== undefined) {
      // Read free under this same write lock a moment ago: a taken key now is a fault, and
      // throwing rolls the batch back, the use just spent with it.
      if (insertOrRead(this.#db, act.claim.key, act.claim.record).status !== "claimed") {
        throw new TesseraError(CODE, "a claim read free was taken under the write lock");
      }
    }
    this.#chain.append(event);
    const denied = deniedAnswerOf(event);
    if (act.claim !== undefined && denied !== undefined) {
      const receipt = { status: "denied", settledAt: Date.parse(event.at) } as const;
      settleRow(this.#db, act.claim.key, receipt, JSON.stringify(denied));
    }
    return Object.freeze({ status: "recorded", recorded: "event", used: spent.used });
  }

  /** The act's statements, under the write lock of the transaction the caller holds. */
  #write(
    act: Act,
    event: AuditEvent,
    exhausted: AuditEvent | undefined,
    versions: ReturnType<typeof checkVersions>,
  ): ActResult {
    try {
      // Under the write lock, so no grant change can land between this read and the commit.
      for (const check of versions) {
        const now = this.#db.statement(VERSION_SQL).pluck().get(check.namespaceId, check.subject);
        if ((typeof now === "string" ? now : "0") !== check.version) return STALE;
      }
      if (act.spend !== undefined && exhausted === undefined)
        return this.#spendOrNothing(act, event);
      if (act.claim !== undefined) {
        const claimed = insertOrRead(this.#db, act.claim.key, act.claim.record);
        // Taken: nothing else of this act is written, and the caller reads the claim's answer.
        if (claimed.status === "already_claimed") return claimed;
      }
      let recorded = event;
      let used: number | undefined;
      if (act.spend !== undefined) {
        const { namespaceId, grantId, maxUses } = act.spend;
        const spent = consumeRow(this.#db, namespaceId, grantId, maxUses);
        used = spent.used;
        if (!spent.consumed && exhausted !== undefined) recorded = exhausted;
      }
      this.#chain.append(recorded);
      const denied = deniedAnswerOf(recorded);
      if (act.claim !== undefined && denied !== undefined) {
        // Nothing will run for a denial: its claim is settled now, with the refusal as answer.
        const receipt = { status: "denied", settledAt: Date.parse(recorded.at) } as const;
        settleRow(this.#db, act.claim.key, receipt, JSON.stringify(denied));
      }
      return Object.freeze({
        status: "recorded",
        recorded: recorded === event ? "event" : "exhausted",
        ...(used === undefined ? {} : { used }),
      });
    } catch (error) {
      if (isTesseraError(error) && error.code.endsWith("_unavailable")) throw error;
      if (isTesseraError(error)) {
        throw new TesseraError(CODE, "the act could not be recorded whole", { cause: error });
      }
      throw unavailable(CODE, error);
    }
  }
}

/** Everything a withdrawal writes, checked before any statement runs. */
function checkedWithdrawal(withdrawal: Withdrawal): { event: AuditEvent; answer: string } {
  const { event, answer } = checkWithdrawal(withdrawal);
  return { event, answer };
}
