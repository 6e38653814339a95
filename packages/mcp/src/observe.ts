import type { ActLedger, AuditEvent, AuditSink } from "@tessera/core";

/**
 * The gateway's decision events, seen on their way to the store: `tessera mcp` writes one log
 * line per tool call from them. Only an event the store took is seen (an act's recorded event,
 * or the exhausted one when its spend lost; an append that resolved).
 */
export type DecisionObserver = (event: AuditEvent) => void;

export function observeActs(inner: ActLedger, seen: DecisionObserver): ActLedger {
  return {
    record: async (act) => {
      const result = await inner.record(act);
      if (result.status === "recorded") {
        seen(result.recorded === "exhausted" && act.exhausted ? act.exhausted : act.event);
      }
      return result;
    },
  };
}

export function observeAudit<S extends AuditSink>(inner: S, seen: DecisionObserver): S {
  return new Proxy(inner, {
    get: (target, key, receiver) => {
      if (key !== "append") {
        const value = Reflect.get(target, key, receiver);
        return typeof value === "function" ? value.bind(target) : value;
      }
      return (event: AuditEvent) => {
        const appended = target.append(event);
        if (appended === undefined) {
          seen(event);
          return appended;
        }
        return appended.then(() => seen(event));
      };
    },
  });
}
