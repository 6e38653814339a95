import type { AsyncLocalStorage } from "node:async_hooks";
import type { AuditSink } from "@tessera/core";
import { auditHolds } from "@tessera/core/store-kit";
import type { ServiceContext } from "../context.js";
import { turnIdentity } from "../principals.js";
import type { CallScope } from "./a2ui-scope.js";

/**
 * The audit sink as the gate sees it: each event stamped with the principal of the call it
 * belongs to, as the kernel stamps its own, so the principal's explain and audit routes find
 * them. The gate itself knows only the host session.
 *
 * Written after the reply, in the service's write window (`AnswerWrites`, with the answers):
 * the gate's event reports what the caller got (receipt, reply code), while what was decided
 * and spent is already durable in the kernel's act, so it need not cost the caller a write of
 * its own. It goes through the act ledger (an act of one event), not beside it: the events of
 * a window share its batches, and on Redis a ledger that sees only its own writes on the audit
 * stream needs no second script to relearn the stream's head. A crash inside the window
 * (≤ 10 ms) can lose a gate event, never the act; the audit and explain routes write what
 * waits before they read. An event the store refuses is offered again (`AnswerWrites`), once
 * the store is asked whether it holds it already; one still refused at close is lost, as the
 * gate's events always were (the gate ignores audit failures: the outcome stands).
 */
export function stampedAudit(
  context: ServiceContext,
  calls: AsyncLocalStorage<CallScope>,
): AuditSink {
  const { acts, retry } = context;
  let next = 0;
  return {
    append: (event) => {
      const scope = calls.getStore();
      const principal = scope?.principal;
      // The gate names the call ID as the trace; the caller's trace, when it gave one, wins.
      const traceId = scope?.trace.joined ? scope.trace.traceId : undefined;
      const stamped =
        principal === undefined
          ? event
          : Object.assign(
              {},
              event,
              turnIdentity(principal),
              traceId === undefined ? {} : { traceId },
            );
      let offered = false;
      retry.writes.later(`gate-event\u0000${next++}`, async () => {
        // Offered again after a failure: the write may have landed and only its reply been
        // lost, and the event is not written twice.
        if (offered && (await auditHolds(context.stores.audit, stamped))) return;
        offered = true;
        await acts.record({ event: stamped });
      });
      return Promise.resolve();
    },
  };
}
