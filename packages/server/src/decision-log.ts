import type { ActLedger, AuditEvent, AuditSink, MessageEnvelope } from "@tessera/core";
import { observeActLedger } from "@tessera/core/store-kit";
import type { FastifyBaseLogger } from "fastify";
import type { RequestTrace } from "./tracing.js";

/** Whose decision a request opens: the event's principal fields. */
interface Decider {
  readonly namespaceId: string;
  readonly actor: string;
  readonly authority: string;
  readonly owner?: string | undefined;
}

/**
 * A decision still waiting for its answer (latency) or for its event (a denial after reply).
 * Found from its event by trace ID, then call ID and principal: the trace ID is the caller's
 * (`traceparent`), so concurrent requests may share it.
 */
export interface OpenDecision {
  readonly started: number;
  readonly reqId: string;
  readonly traceId: string;
  readonly callId: string;
  readonly decider: Decider;
  readonly trace: RequestTrace | undefined;
  /** Set once this request decides: a retry answered from its claim never matches an event. */
  deciding: boolean;
  latencyMs?: number;
  readonly events: AuditEvent[];
  /** Another open decision of the same trace ID (rare: a caller reusing one `traceparent`). */
  next: OpenDecision | undefined;
}

/** How long an opened decision waits for an event that may never come (a failed store). */
const FORGET_MS = 60_000;
const MAX_OPEN = 10_000;

/**
 * One log line per decision, `msg: "decision"`: call ID, principal, action, resource, outcome,
 * code, reason, trace ID, grant, the request's ID and its latency. Built from the decision's
 * own audit event as it passes on its way to the store (the act ledger, or the audit sink for
 * a denial written after its reply), so the line says what audit says; never the payload, the
 * body or a token, which the event does not hold. A route that opens a decision says so first
 * (`begin`) and when its answer is ready (`answered`); the line is written once both the answer
 * and the event are in, whichever comes last. An event no route opened (an A2UI gate
 * decision) is written as it passes, without latency.
 */
export class DecisionLog {
  #log: FastifyBaseLogger | undefined;
  /** By trace ID; decisions sharing one are chained (`next`). */
  readonly #open = new Map<string, OpenDecision>();

  attach(log: FastifyBaseLogger): void {
    this.#log = log;
  }

  begin(
    traceId: string,
    reqId: string,
    callId: string,
    decider: Decider,
    trace?: RequestTrace,
  ): OpenDecision {
    this.#forgetStale();
    const open: OpenDecision = {
      started: performance.now(),
      reqId,
      traceId,
      callId,
      decider,
      trace,
      deciding: false,
      events: [],
      next: undefined,
    };
    const first = this.#open.get(traceId);
    if (first === undefined) this.#open.set(traceId, open);
    else {
      let last = first;
      while (last.next !== undefined) last = last.next;
      last.next = open;
    }
    return open;
  }

  answered(open: OpenDecision): void {
    open.latencyMs = Math.round((performance.now() - open.started) * 1000) / 1000;
    // A request that never decided (a replay, a refused claim) will see no event.
    if (!open.deciding) {
      this.#remove(open);
      return;
    }
    if (open.events.length === 0) return;
    this.#remove(open);
    for (const event of open.events) this.#write(event, open);
  }

  /** The traced request that decided `event`, for the act ledger's span. */
  traceOf(event: AuditEvent): RequestTrace | undefined {
    return this.#find(event.traceId, event.callId, event)?.trace;
  }

  /** The traced request whose decision delivers `envelope`. */
  traceOfDelivery(envelope: MessageEnvelope): RequestTrace | undefined {
    return this.#find(envelope.traceId, envelope.callId, { actor: envelope.sender })?.trace;
  }

  /** A retry answered from its stored answer: no new decision, one line saying so. */
  replayed(fields: { reqId: string; callId: string; route: string; principal: object }): void {
    this.#log?.info({ ...fields, outcome: "replayed" }, "decision");
  }

  acts(inner: ActLedger): ActLedger {
    return observeActLedger(inner, (event) => this.#seen(event));
  }

  audit<S extends AuditSink>(inner: S): S {
    return new Proxy(inner, {
      get: (target, key, receiver) => {
        if (key !== "append") {
          const value = Reflect.get(target, key, receiver);
          return typeof value === "function" ? value.bind(target) : value;
        }
        // The options pass on: a denial after its reply may be written unflushed (AppendOptions).
        return (event: AuditEvent, options?: Parameters<AuditSink["append"]>[1]) => {
          const appended = target.append(event, options);
          if (appended === undefined) {
            this.#seen(event);
            return appended;
          }
          return appended.then(() => this.#seen(event));
        };
      },
    });
  }

  #seen(event: AuditEvent): void {
    const open = this.#find(event.traceId, event.callId, event);
    if (open === undefined) {
      this.#write(event, undefined);
      return;
    }
    if (open.latencyMs === undefined) {
      open.events.push(event);
      return;
    }
    this.#remove(open);
    this.#write(event, open);
  }

  /**
   * The deciding request of this trace and call ID whose principal `who` names: an event's
   * whole principal, or an envelope's sender (its actor, all an envelope says; an owner absent
   * from a whole principal must be absent from the request's too).
   */
  #find(
    traceId: string,
    callId: string,
    who: { namespaceId?: string; actor?: string; authority?: string; owner?: string },
  ): OpenDecision | undefined {
    const whole = who.namespaceId !== undefined;
    for (let open = this.#open.get(traceId); open !== undefined; open = open.next) {
      const decider = open.decider;
      if (
        open.deciding &&
        open.callId === callId &&
        who.actor === decider.actor &&
        (!whole ||
          (who.namespaceId === decider.namespaceId &&
            who.authority === decider.authority &&
            who.owner === decider.owner))
      ) {
        return open;
      }
    }
    return undefined;
  }

  /** Unlinks `open` from its trace's chain. */
  #remove(open: OpenDecision): void {
    const first = this.#open.get(open.traceId);
    if (first === open) {
      this.#open.delete(open.traceId);
      if (open.next !== undefined) this.#open.set(open.traceId, open.next);
      return;
    }
    for (let at = first; at !== undefined; at = at.next) {
      if (at.next === open) {
        at.next = open.next;
        return;
      }
    }
  }

  #write(event: AuditEvent, open: OpenDecision | undefined): void {
    const log = this.#log;
    if (log === undefined) return;
    const principal = {
      namespaceId: event.namespaceId,
      actor: event.actor,
      authority: event.authority,
      ...(event.owner === undefined ? {} : { owner: event.owner }),
    };
    log.info(
      {
        ...(open === undefined ? {} : { reqId: open.reqId }),
        source: event.source,
        callId: event.callId,
        principal,
        action: event.action,
        resource: event.resource,
        outcome: event.outcome,
        code: event.code,
        reason: event.reason,
        traceId: event.traceId,
        ...(event.grantId === undefined ? {} : { grantId: event.grantId }),
        // Written by the kernel (a transport's code, redacted), never a caller's value.
        ...(event.detail === undefined ? {} : { detail: event.detail }),
        ...(open?.latencyMs === undefined ? {} : { latencyMs: open.latencyMs }),
      },
      "decision",
    );
  }

  #forgetStale(): void {
    const now = performance.now();
    for (const open of this.#open.values()) {
      if (this.#open.size < MAX_OPEN && now - open.started < FORGET_MS) break;
      this.#remove(open);
    }
  }
}
