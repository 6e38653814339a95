import { hostname } from "node:os";
import {
  type AuditEvent,
  type AuditSink,
  type CallerCode,
  type ClaimReceipt,
  type ClaimStore,
  type Clock,
  systemClock,
  TesseraError,
} from "@tessera/core";
import { CatalogIndex } from "../catalog/catalog.js";
import { messageValidators } from "../schemas/official.js";
import { composeStages } from "./pipeline.js";
import { refusalReply, valueReply } from "./replies.js";
import { type CallContext, type GateRefusal, gateStages } from "./stages.js";
import type { FunctionCallGateOptions, GateReceipt, GateReply, GateResult } from "./types.js";

/**
 * Guards A2UI v1.0 `callRendererFunction` messages so that each (trusted session,
 * functionCallId) runs its callback at most once, however many workers see it:
 *
 *     validate → catalog → exclusive claim → policy + approval → callback → receipt
 *
 * The guarantee spans exactly what the claim store spans: a `MemoryClaimStore` covers one
 * process, a `DirectoryClaimStore` one machine, a database store every worker that uses it.
 */
export class FunctionCallGate {
  readonly #run: (context: CallContext) => Promise<GateResult>;
  readonly #claims: ClaimStore;
  readonly #audit: AuditSink | undefined;
  readonly #clock: Clock;

  constructor(options: FunctionCallGateOptions) {
    if (typeof options?.claims?.claim !== "function" || typeof options.invoke !== "function") {
      throw new TesseraError(
        "invalid_config",
        "the gate needs a claim store and an invoke callback",
      );
    }
    // Compile the message schema now, so a broken install fails here and not on a first call.
    void messageValidators().callRendererFunction;
    this.#claims = options.claims;
    this.#audit = options.audit;
    this.#clock = options.clock ?? systemClock;
    const stages = gateStages({
      catalog: new CatalogIndex(options.catalog),
      claims: options.claims,
      invoke: options.invoke,
      approve: options.approve,
      clock: this.#clock,
      worker: options.worker ?? `${hostname()}:${process.pid}`,
    });
    this.#run = composeStages(stages, {
      onDone: (context) => this.#dispatched(context),
      onRefuse: (refusal, context) => this.#refused(refusal, context),
      onError: (error, context, stage) => this.#failed(error, context, stage),
    });
  }

  /**
   * Handles one message: a parsed object or raw JSON text. Never throws because of the
   * message; every outcome is a reply plus a receipt. Rejects only when the host passes a
   * session that is not a non-empty string.
   */
  handle(session: string, message: unknown): Promise<GateResult> {
    if (typeof session !== "string" || session.length === 0) {
      return Promise.reject(
        new TesseraError("invalid_input", "the trusted session must be a non-empty string"),
      );
    }
    return this.#run({ session, input: message, claimed: false });
  }

  async #dispatched(context: CallContext): Promise<GateResult> {
    const id = context.message?.functionCallId as string;
    const detail = await this.#settle(context, "dispatched");
    return this.#finish(context, valueReply(id, context.value), "dispatched", {
      reason: "dispatched",
      detail,
    });
  }

  async #refused(refusal: GateRefusal, context: CallContext): Promise<GateResult> {
    const id = context.message?.functionCallId;
    const reply = refusal.reply ?? refusalReply(refusal.reason, id as string);
    if (refusal.reason === "duplicate_call") {
      return this.#finish(context, reply, "none", refusal);
    }
    // A refusal after the claim consumes it: a new ID is a new attempt.
    const settleNote = context.claimed ? await this.#settle(context, "denied") : undefined;
    return this.#finish(context, reply, "denied", {
      ...refusal,
      detail: refusal.detail ?? settleNote,
    });
  }

  async #failed(error: unknown, context: CallContext, stage: string): Promise<GateResult> {
    const id = context.message?.functionCallId as string;
    const cause = error instanceof TesseraError ? error.code : "error";
    switch (stage) {
      case "claim":
        // Fail closed: nothing runs when the store cannot say who owns the ID.
        return this.#finish(context, refusalReply("claim_store_unavailable", id), "denied", {
          reason: "claim_store_unavailable",
          detail: cause,
        });
      case "approve":
        return this.#refused({ reason: "approval_denied", detail: "approval hook threw" }, context);
      case "dispatch": {
        const note = await this.#settle(context, "failed");
        return this.#finish(context, refusalReply("callback_failed", id), "failed", {
          reason: "callback_failed",
          detail: note ?? "callback threw",
        });
      }
      default:
        // validate and catalog do not throw on any input; if they ever do, nothing has run.
        return this.#refused({ reason: "invalid_message", detail: `${stage} threw` }, context);
    }
  }

  /** Records the outcome; a store that fails here leaves the claim in doubt (never re-run). */
  async #settle(context: CallContext, status: ClaimReceipt["status"]): Promise<string | undefined> {
    const functionCallId = context.message?.functionCallId as string;
    try {
      await this.#claims.settle(
        { session: context.session, functionCallId },
        { status, settledAt: this.#clock.now() },
      );
      return undefined;
    } catch {
      return "outcome not recorded: the claim stays in doubt";
    }
  }

  async #finish(
    context: CallContext,
    reply: GateReply,
    status: GateReceipt["status"],
    refusal: GateRefusal,
  ): Promise<GateResult> {
    const functionCallId = context.message?.functionCallId ?? correlatedId(reply);
    const receipt: GateReceipt = Object.freeze({
      status,
      reason: refusal.reason,
      session: context.session,
      ...(functionCallId === undefined ? {} : { functionCallId }),
      ...(refusal.previous === undefined ? {} : { previous: refusal.previous }),
      ...(refusal.changedBody === undefined ? {} : { changedBody: refusal.changedBody }),
    });
    if (this.#audit) await this.#record(receipt, reply, refusal.detail);
    return Object.freeze({ reply, receipt });
  }

  async #record(receipt: GateReceipt, reply: GateReply, detail: string | undefined): Promise<void> {
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
      receipt: receipt.status,
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

function correlatedId(reply: GateReply): string | undefined {
  if ("rendererFunctionResponse" in reply) return reply.rendererFunctionResponse.functionCallId;
  return "functionCallId" in reply.error ? reply.error.functionCallId : undefined;
}

function replyCode(reply: GateReply): CallerCode | null {
  if ("error" in reply) return reply.error.code;
  const response = reply.rendererFunctionResponse;
  return "error" in response ? (response.error.code as CallerCode) : null;
}
