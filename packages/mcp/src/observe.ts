import type { ActLedger, AuditEvent, AuditSink } from "@tessera/core";
import { observeActLedger } from "@tessera/core/store-kit";

/**
 * The gateway's decision events, seen on their way to the store: `tessera mcp` writes one log
 * line per tool call from them. Only an event the store took is seen (an act's recorded event,
 * or the exhausted one when its spend lost; a withdrawal's event; an append that resolved).
 */
export type DecisionObserver = (event: AuditEvent) => void;

/**
 * The store's act ledger, its decisions seen. What the ledger declares is kept: its `withdraw`
 * (an act whose reply was lost is withdrawn, so its call ID is not blocked and its use comes
 * back), the grant versions it checks in each act (`checksVersionsIn`: a warm call is its act
 * alone, one round trip) and `undoesLostSpends`. Keeping `record` only lost all three.
 */
export function observeActs(inner: ActLedger, seen: DecisionObserver): ActLedger {
  return observeActLedger(inner, seen);
}

export function observeAudit<S extends AuditSink>(inner: S, seen: DecisionObserver): S {
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
          seen(event);
          return appended;
        }
        return appended.then(() => seen(event));
      };
    },
  });
}
