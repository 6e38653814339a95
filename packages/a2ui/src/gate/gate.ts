import { hostname } from "node:os";
import {
  type AuditEvent,
  type AuditSink,
  type ClaimKey,
  type ClaimReceipt,
  type ClaimRecord,
  type ClaimStore,
  type Clock,
  type GateReason,
  type JsonValue,
  type ReceiptStatus,
  systemClock,
  TesseraError,
} from "@tessera/core";
import { CatalogSet } from "../catalog/catalog.js";
import { messageValidators } from "../schemas/official.js";
import { type Admission, claimAndDecide, claimThenApprove } from "./admission.js";
import { checkCatalog, readCall } from "./message.js";
import {
  correlatedValidationError,
  refusalReply,
  replyCode,
  sendable,
  valueReply,
} from "./replies.js";
import { type SettleOutcome, SettleQueue, type SettleTiming } from "./settle-queue.js";
import type {
  ApproveFunction,
  DecideFunction,
  FunctionCallGateOptions,
  FunctionInvocation,
  GateReceipt,
  GateReply,
  GateResult,
  InvokeFunction,
} from "./types.js";

/** What the receipt and the audit event say about one outcome, beside the reply. */
interface Outcome {
  readonly reason: GateReason;
  readonly detail?: string | undefined;
  readonly previous?: ReceiptStatus;
  readonly changedBody?: boolean;
}

/**
 * Guards A2UI v1.0 `callRendererFunction` messages so that each (trusted session,
 * functionCallId) runs its callback at most once, however many workers see it:
 *
 *     validate → catalog → exclusive claim → policy + approval → callback → reply, receipt
 *
 * The guarantee spans exactly what the claim store spans: a `InMemoryClaimStore` covers one
 * process, a `DirectoryClaimStore` one machine, a database store every worker that uses it.
 *
 * With `decide` (a kernel's act ledger, `kernelDecision`), the claim and the decision are one
 * act, one durable write; without it, the claim, then `approve`.
 *
 * Only the claim is durable before the callback. By default the receipt is written after the
 * reply (`settle: "after-reply"`): a host calls `drain()` (or `close()`) before it exits, and a
 * process that dies first leaves the call in doubt, never re-run.
 */
export class FunctionCallGate {
  readonly #catalogs: CatalogSet;
  readonly #claims: ClaimStore;
  readonly #invoke: InvokeFunction;
  readonly #approve: ApproveFunction | undefined;
  readonly #decide: DecideFunction | undefined;
  readonly #audit: AuditSink | undefined;
  readonly #clock: Clock;
  readonly #worker: string;
  readonly #timing: SettleTiming;
  readonly #settles: SettleQueue;
  /** Calls between `handle` and their reply, so `drain()` also waits for their settles. */
  readonly #handling = new Map<number, Promise<GateResult>>();
  #nextCall = 0;
  #closed = false;

  constructor(options: FunctionCallGateOptions) {
    if (typeof options?.claims?.claim !== "function" || typeof options.invoke !== "function") {
      throw new TesseraError(
        "invalid_config",
        "the gate needs a claim store and an invoke callback",
      );
    }
    if (options.decide !== undefined && options.approve !== undefined) {
      throw new TesseraError(
        "invalid_config",
        "give the gate approve or decide, not both: decide takes the claim and decides",
      );
    }
    if (options.decide !== undefined && typeof options.decide !== "function") {
      throw new TesseraError("invalid_config", "decide must be a function");
    }
    // Compile the message schema now, so a broken install fails here and not on a first call.
    void messageValidators().callRendererFunction;
    this.#catalogs = new CatalogSet(options);
    this.#claims = options.claims;
    this.#invoke = options.invoke;
    this.#approve = options.approve;
    this.#decide = options.decide;
    this.#audit = options.audit;
    this.#clock = options.clock ?? systemClock;
    this.#worker = options.worker ?? `${hostname()}:${process.pid}`;
    const timing = options.settle ?? "after-reply";
    if (timing !== "after-reply" && timing !== "before-reply") {
      throw new TesseraError("invalid_config", 'settle is "after-reply" or "before-reply"');
    }
    this.#timing = timing;
    this.#settles = new SettleQueue(options.claims);
  }

  /**
   * Handles one message: a parsed object or raw JSON text. Never throws because of the
   * message; every outcome is a reply plus a receipt. Rejects only when the host passes a
   * session that is not a non-empty string of well-formed text (no lone surrogate).
   */
  handle(session: string, message: unknown): Promise<GateResult> {
    if (typeof session !== "string" || session.length === 0 || !session.isWellFormed()) {
      return Promise.reject(
        new TesseraError(
          "invalid_input",
          "the trusted session must be a non-empty string with no lone surrogate",
        ),
      );
    }
    const id = this.#nextCall++;
    const handling = this.#handle(session, message);
    this.#handling.set(id, handling);
    // A side chain, not a wrapper: the caller's reply waits for nothing it adds.
    const done = () => this.#handling.delete(id);
    void handling.then(done, done);
    return handling;
  }

  /**
   * Resolves once every call handled before this point has replied and its receipt has been
   * written or given up (then the claim stays in doubt). Never rejects. A host calls it (or
   * `close()`) before it exits: a receipt still being written when the process ends is lost
   * and its call reads in doubt. A callback that never returns holds `drain()` with it.
   */
  async drain(): Promise<void> {
    await Promise.allSettled([...this.#handling.values()]);
    await this.#settles.drain();
  }

  /**
   * Writes now the receipts waiting after their replies, and resolves once they have been
   * written or given up. Unlike `drain()`, it does not wait for calls still running (a
   * callback that has not returned holds nothing here). Never rejects.
   */
  settled(): Promise<void> {
    return this.#settles.drain();
  }

  /**
   * Refuses new calls (correlated `EXECUTION_FAILED`, receipt `denied`, nothing claimed, so
   * the ID stays free for another worker), then drains. The claim store stays open: the host
   * owns it.
   */
  async close(): Promise<void> {
    this.#closed = true;
    await this.drain();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /** The whole pipeline, one step after another; each refusal returns where it is decided. */
  async #handle(session: string, input: unknown): Promise<GateResult> {
    const read = readCall(input);
    if (!read.ok) {
      return this.#finish(session, read.functionCallId, read.reply, "denied", {
        reason: "invalid_message",
        detail: read.detail,
      });
    }
    const message = read.message;
    const id = message.functionCallId;

    // Catalog: refused here, nothing is claimed, so the ID stays free for a well-formed call.
    const found = checkCatalog(this.#catalogs, message);
    if (found === "unreadable") {
      // Only a host's own args object can throw while the schema reads it (a getter, a proxy).
      const reply = correlatedValidationError(id, "The message could not be read.");
      return this.#finish(session, id, reply, "denied", {
        reason: "invalid_message",
        detail: "catalog check threw",
      });
    }
    if (typeof found === "string") {
      return this.#finish(session, id, refusalReply(found, id), "denied", { reason: found });
    }
    const invocation: FunctionInvocation = Object.freeze({
      session,
      functionCallId: id,
      catalogId: message.catalogId,
      call: message.call,
      args: message.args ?? {},
    });

    // The exclusive claim comes before policy, approval and dispatch: whoever loses it (a
    // racing worker, a retry, a restarted worker, a changed body) learns only that the ID is used.
    if (this.#closed) {
      // Checked before the claim: a call that reaches a closing worker leaves its ID unused.
      return this.#finish(session, id, refusalReply("claim_store_unavailable", id), "denied", {
        reason: "claim_store_unavailable",
        detail: "the gate is closed",
      });
    }
    const key: ClaimKey = { session, functionCallId: id };
    const record: ClaimRecord = {
      bodyHash: message.bodyHash,
      claimedAt: this.#clock.now(),
      worker: this.#worker,
    };
    const admitted = await this.#admit(key, record, invocation);
    if (admitted.status === "unavailable") {
      // Fail closed: nothing runs when the store cannot say who owns the ID.
      const reply = refusalReply("claim_store_unavailable", id);
      return this.#finish(session, id, reply, "denied", {
        reason: "claim_store_unavailable",
        detail: admitted.detail,
      });
    }
    if (admitted.status === "duplicate") {
      const earlier = admitted.existing.bodyHash;
      return this.#finish(session, id, refusalReply("duplicate_call", id), "none", {
        reason: "duplicate_call",
        previous: admitted.existing.receipt?.status ?? "in_doubt",
        // An empty body hash is no body's hash (the gate's are SHA-256): the store lost the
        // earlier claim's record (a directory marker whose writer died before writing it), so
        // whether this body differs is unknown and not claimed either way.
        ...(earlier === "" ? {} : { changedBody: earlier !== message.bodyHash }),
      });
    }

    // From here on the claim is held: every outcome is settled, and a refusal consumes the ID
    // (a new ID is a new attempt).
    if (admitted.status === "refused") {
      const { reason, detail } = admitted;
      const reply = refusalReply(reason, id);
      // A refusal `decide` recorded was settled `denied` in its own act.
      if (admitted.settled) return this.#finish(session, id, reply, "denied", { reason, detail });
      return this.#settle(key, reply, "denied", { reason, detail });
    }

    let value: unknown;
    try {
      value = await this.#invoke(invocation);
    } catch {
      return this.#settle(key, refusalReply("callback_failed", id), "failed", {
        reason: "callback_failed",
        detail: "callback threw",
      });
    }
    if (!sendable(value)) {
      // The callback ran, but what it returned cannot travel as the reply's JSON `value` (a
      // BigInt or a cycle made the host's serialization throw; a function or a symbol made a
      // reply without `value`, which is no A2UI message): it failed to produce a result.
      return this.#settle(key, refusalReply("callback_failed", id), "failed", {
        reason: "callback_failed",
        detail: "callback returned a value that is not JSON",
      });
    }
    return this.#settle(key, valueReply(id, value), "dispatched", { reason: "dispatched" });
  }

  /** The exclusive claim, then policy and approval: one act through `decide` when the gate has one. */
  #admit(key: ClaimKey, record: ClaimRecord, invocation: FunctionInvocation): Promise<Admission> {
    const decide = this.#decide;
    return decide === undefined
      ? claimThenApprove(this.#claims, this.#approve, key, record, invocation)
      : claimAndDecide(decide, key, record, invocation);
  }

  /**
   * Writes the outcome of a held claim and replies: after the receipt lands, or at once with
   * the receipt on its way. The reply and the receipt always carry the same status, so the
   * reply never contradicts the receipt once it lands. A receipt that cannot be written
   * leaves the claim in doubt (never re-run) and says so in audit.
   */
  #settle(
    key: ClaimKey,
    reply: GateReply,
    status: ClaimReceipt["status"],
    outcome: Outcome,
  ): Promise<GateResult> {
    const receipt: ClaimReceipt = { status, settledAt: this.#clock.now() };
    // A gate that decides through an act ledger keeps the reply as the claim's answer, as the
    // service keeps every act's answer; without `decide`, the settle is the receipt alone.
    const answer = this.#decide === undefined ? undefined : (reply as unknown as JsonValue);
    if (this.#timing === "before-reply") {
      return this.#settleFirst(key, receipt, reply, outcome, answer);
    }
    // Not async itself: an extra async layer would cost the reply two more microtask turns.
    let finished: Promise<GateResult> | undefined;
    const audit = this.#audit;
    void this.#settles.write(
      key,
      receipt,
      audit &&
        (async (failure) => {
          // After the decision's own event, so audit reads in the order things happened.
          const result = await finished;
          if (result) await this.#record(result, notRecorded(failure), "in_doubt");
        }),
      answer,
    );
    finished = this.#finish(key.session, key.functionCallId, reply, status, outcome);
    return finished;
  }

  async #settleFirst(
    key: ClaimKey,
    receipt: ClaimReceipt,
    reply: GateReply,
    outcome: Outcome,
    answer: JsonValue | undefined,
  ): Promise<GateResult> {
    // Awaited here, so drain() covers it through the call itself; the queue only for retries.
    let note: string | undefined;
    try {
      await (answer === undefined
        ? this.#claims.settle(key, receipt)
        : this.#claims.settle(key, receipt, answer));
    } catch (error) {
      const settled = await this.#settles.retry(key, receipt, error, answer);
      note = settled.recorded ? undefined : notRecorded(settled);
    }
    // `return await`: a returned promise would cost the reply two more microtask turns.
    return await this.#finish(
      key.session,
      key.functionCallId,
      reply,
      receipt.status,
      Object.assign({}, outcome, { detail: note ?? outcome.detail }),
    );
  }

  async #finish(
    session: string,
    functionCallId: string | undefined,
    reply: GateReply,
    status: GateReceipt["status"],
    outcome: Outcome,
  ): Promise<GateResult> {
    const receipt: GateReceipt = Object.freeze({
      status,
      reason: outcome.reason,
      session,
      ...(functionCallId === undefined ? {} : { functionCallId }),
      ...(outcome.previous === undefined ? {} : { previous: outcome.previous }),
      ...(outcome.changedBody === undefined ? {} : { changedBody: outcome.changedBody }),
    });
    const result: GateResult = Object.freeze({ reply, receipt });
    if (this.#audit) await this.#record(result, outcome.detail);
    return result;
  }

  /** `stored` overrides the receipt the event reports: `in_doubt` when its write was given up. */
  async #record(
    { receipt, reply }: GateResult,
    detail: string | undefined,
    stored?: "in_doubt",
  ): Promise<void> {
    const code = replyCode(reply);
    const ran = receipt.status === "dispatched" || receipt.status === "failed";
    const event: AuditEvent = {
      at: new Date(this.#clock.now()).toISOString(),
      source: "gate",
      outcome: ran ? "allowed" : "denied",
      code,
      reason: receipt.reason,
      traceId: receipt.functionCallId ?? "",
      callId: receipt.functionCallId ?? "",
      session: receipt.session,
      receipt: stored ?? receipt.status,
      ...(receipt.previous === undefined ? {} : { detail: `earlier claim: ${receipt.previous}` }),
      ...(detail === undefined ? {} : { detail }),
    };
    try {
      await this.#audit?.append(event);
    } catch {
      // The decision already stands (a callback may have run); an audit outage cannot undo it.
    }
  }
}

function notRecorded(failure: SettleOutcome & { recorded: false }): string {
  return `outcome not recorded (${failure.code}, ${failure.attempts} attempt(s)): the claim stays in doubt`;
}
