import type { ActLedger, AuditEvent, AuditSink } from "@tessera/core";
import type { FastifyBaseLogger } from "fastify";

/** A decision still waiting for its answer (latency) or for its event (a denial after reply). */
interface Open {
  readonly started: number;
  readonly reqId: string;
  latencyMs?: number;
  readonly events: AuditEvent[];
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
  readonly #open = new Map<string, Open>();

  attach(log: FastifyBaseLogger): void {
    this.#log = log;
  }

  begin(traceId: string, reqId: string): void {
    this.#forgetStale();
    this.#open.set(traceId, { started: performance.now(), reqId, events: [] });
  }

  answered(traceId: string): void {
    const open = this.#open.get(traceId);
    if (open === undefined) return;
    open.latencyMs = Math.round((performance.now() - open.started) * 1000) / 1000;
    if (open.events.length === 0) return;
    this.#open.delete(traceId);
    for (const event of open.events) this.#write(event, open);
  }

  /** A retry answered from its stored answer: no new decision, one line saying so. */
  replayed(fields: { reqId: string; callId: string; route: string; principal: object }): void {
    this.#log?.info({ ...fields, outcome: "replayed" }, "decision");
  }

  acts(inner: ActLedger): ActLedger {
    return {
      record: async (act) => {
        const result = await inner.record(act);
        if (result.status === "recorded") {
          this.#seen(result.recorded === "exhausted" && act.exhausted ? act.exhausted : act.event);
        }
        return result;
      },
    };
  }

  audit<S extends AuditSink>(inner: S): S {
    return new Proxy(inner, {
      get: (target, key, receiver) => {
        if (key !== "append") {
          const value = Reflect.get(target, key, receiver);
          return typeof value === "function" ? value.bind(target) : value;
        }
        return (event: AuditEvent) => {
          const appended = target.append(event);
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
    const open = this.#open.get(event.traceId);
    if (open === undefined) {
      this.#write(event, undefined);
      return;
    }
    if (open.latencyMs === undefined) {
      open.events.push(event);
      return;
    }
    this.#open.delete(event.traceId);
    this.#write(event, open);
  }

  #write(event: AuditEvent, open: Open | undefined): void {
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
    for (const [traceId, open] of this.#open) {
      if (this.#open.size < MAX_OPEN && now - open.started < FORGET_MS) break;
      this.#open.delete(traceId);
    }
  }
}
