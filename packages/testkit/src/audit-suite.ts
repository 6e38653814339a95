import type { ReadableAuditSink } from "@tessera/core";
import { describe, expect } from "vitest";
import { auditChainCases } from "./audit-chain-cases.js";
import { auditConcurrencyCases } from "./audit-concurrency-cases.js";
import { auditEvent, expectOneChain } from "./audit-fixtures.js";
import { auditHostileCases } from "./audit-hostile-cases.js";
import { auditReadCases } from "./audit-read-cases.js";
import { expectCode, resultOrCode } from "./errors.js";
import { type OpenedStore, type StoreFactory, suiteCases } from "./factory.js";

const UNAVAILABLE = ["audit_unavailable"];

/**
 * The `ReadableAuditSink` contract: append-only, read back in append order, filters by call
 * and trace ID, a limit bounds the answer (the oldest events, or with `newest` the newest); concurrent and cross-process appends are all kept
 * (each process's own order preserved); an outage fails closed. And the trail is a hash chain
 * per stream (core's `audit/chain.ts`): every event comes back linked by the sink, and
 * `verifyAuditChain` accepts the whole trail however many writers, in one process or in
 * many, appended at once.
 */
export function describeAuditSinkConformance<H extends OpenedStore<ReadableAuditSink>>(
  name: string,
  factory: StoreFactory<ReadableAuditSink, H>,
): void {
  const { use, outageCase, outageNote } = suiteCases(factory);

  // The groups declare their cases inside this one describe, in the order they always ran:
  // each case keeps its full name, which reports and skip lists go by.
  describe(`AuditSink conformance: ${name}`, () => {
    auditChainCases(factory);
    auditReadCases(factory);
    auditHostileCases(factory);
    auditConcurrencyCases(factory);

    outageCase(`outage: fails closed with audit_unavailable, recovers${outageNote}`, () =>
      use(async (opened) => {
        const outage = factory.outage?.(opened);
        if (!outage) throw new Error("unreachable: guarded by outage");
        const { store } = opened;
        await store.append(auditEvent(0));
        await outage.interrupt();
        try {
          if (outage.kind !== "blip") {
            await expectCode(() => Promise.resolve(store.append(auditEvent(1))), UNAVAILABLE);
            await expectCode(() => store.read(), UNAVAILABLE);
          } else {
            await resultOrCode(() => Promise.resolve(store.append(auditEvent(1))), UNAVAILABLE);
          }
        } finally {
          await outage.restore();
        }
        await store.append(auditEvent(2));
        const ids = (await store.read()).map((e) => e.callId);
        expect(ids[0]).toBe("call-0");
        expect(ids.at(-1)).toBe("call-2");
        expect(ids.filter((id) => id === "call-2")).toHaveLength(1);
        // Whatever the failed append came to, the chain carries on from what was stored.
        expectOneChain(await store.read());
      }),
    );
  });
}
