import { TesseraError } from "../contracts/errors.js";
import type { AccessContext, AuditEvent } from "../contracts/schemas.js";
import type { CallerCode, KernelReason } from "../contracts/vocabulary.js";
import type { AuditSink } from "../ports/audit-sink.js";

/** The parts of an event that differ per decision. Undefined fields are left out of the event. */
export interface DecisionRecord {
  readonly now: number;
  readonly code: CallerCode | null;
  readonly reason: KernelReason;
  readonly callId: string;
  readonly action?: string;
  readonly resource?: string;
  readonly grantId?: string;
  /** The grant's chain, root first, when it was derived. */
  readonly chain?: readonly string[];
  readonly detail?: string;
}

/**
 * Writes one frozen kernel event per decision, stamped with the turn's trace, its principal
 * (namespace, actor, authority, owner) and the purpose the act was decided under. The ISO timestamp is cached per millisecond: at a million decisions a second most
 * decisions share their millisecond, and `toISOString` would otherwise dominate the cost.
 */
export class AuditWriter {
  readonly #sink: AuditSink | undefined;
  readonly #ctx: AccessContext;
  #lastMs = Number.NaN;
  #lastIso = "";

  constructor(sink: AuditSink | undefined, ctx: AccessContext) {
    this.#sink = sink;
    this.#ctx = ctx;
  }

  /** Resolves (or returns) once the sink has taken the event; throws `audit_unavailable`. */
  write(record: DecisionRecord): undefined | Promise<void> {
    if (this.#sink === undefined) return undefined;
    return this.#append(this.build(record));
  }

  /** The decision's frozen event, not written: the act ledger records it with the act. */
  build(record: DecisionRecord): AuditEvent {
    if (record.now !== this.#lastMs) {
      this.#lastMs = record.now;
      this.#lastIso = new Date(record.now).toISOString();
    }
    const ctx = this.#ctx;
    if (
      ctx.owner !== undefined &&
      ctx.purpose === undefined &&
      record.grantId !== undefined &&
      record.chain === undefined &&
      record.action !== undefined &&
      record.resource !== undefined &&
      record.detail === undefined
    ) {
      // The usual allowed decision (a root grant, a turn with an owner and no purpose) as one
      // literal: the same keys in the same order as below, all held in the object itself
      // rather than four of them in a property array allocated on the side.
      return Object.freeze({
        at: this.#lastIso,
        source: "kernel",
        outcome: record.code === null ? "allowed" : "denied",
        code: record.code,
        reason: record.reason,
        traceId: ctx.traceId,
        callId: record.callId,
        namespaceId: ctx.namespaceId,
        actor: ctx.actor,
        authority: ctx.authority,
        owner: ctx.owner,
        grantId: record.grantId,
        action: record.action,
        resource: record.resource,
      }) as AuditEvent;
    }
    const event: AuditEvent = {
      at: this.#lastIso,
      source: "kernel",
      outcome: record.code === null ? "allowed" : "denied",
      code: record.code,
      reason: record.reason,
      traceId: ctx.traceId,
      callId: record.callId,
      namespaceId: ctx.namespaceId,
      actor: ctx.actor,
      authority: ctx.authority,
    };
    // With namespace, actor and authority, the owner names the principal explain() keys on.
    if (ctx.owner !== undefined) event.owner = ctx.owner;
    if (ctx.purpose !== undefined) event.purpose = ctx.purpose;
    if (record.grantId !== undefined) event.grantId = record.grantId;
    if (record.chain !== undefined) event.chain = [...record.chain];
    if (record.action !== undefined) event.action = record.action;
    if (record.resource !== undefined) event.resource = record.resource;
    if (record.detail !== undefined) event.detail = record.detail;
    return Object.freeze(event);
  }

  #append(event: AuditEvent): undefined | Promise<void> {
    const sink = this.#sink as AuditSink;
    let pending: void | Promise<void>;
    try {
      pending = sink.append(event);
    } catch (error) {
      throw unavailable(error);
    }
    if (pending === undefined) return undefined;
    return pending.catch((error: unknown) => {
      throw unavailable(error);
    });
  }
}

function unavailable(cause: unknown): TesseraError {
  return new TesseraError(
    "audit_unavailable",
    "the audit sink refused the decision's event; the kernel does not act unrecorded",
    { cause },
  );
}
