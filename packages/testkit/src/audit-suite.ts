import type { AuditEvent, ReadableAuditSink } from "@tessera/core";
import { describe, expect } from "vitest";
import { expectCode, resultOrCode } from "./errors.js";
import { type OpenedStore, type StoreFactory, suiteCases } from "./factory.js";
import { HOSTILE_KEYS, oversize } from "./hostile.js";
import { raceInProcesses } from "./processes.js";

const UNAVAILABLE = ["audit_unavailable"];
/** Appends per process in the cross-process case: enough to interleave, cheap on fsync. */
const PER_PROCESS = 40;

export function auditEvent(index: number, overrides: Partial<AuditEvent> = {}): AuditEvent {
  return {
    at: new Date(Date.UTC(2026, 0, 1, 0, 0, 0, index)).toISOString(),
    source: "kernel",
    outcome: index % 2 === 0 ? "allowed" : "denied",
    code: index % 2 === 0 ? null : "no_matching_grant",
    reason: index % 2 === 0 ? "allowed" : "no_capability",
    traceId: `trace-${index % 3}`,
    callId: `call-${index}`,
    actor: "agent",
    grantId: index % 2 === 0 ? `grant-${index}` : undefined,
    ...overrides,
  };
}

/** Drops keys whose value is undefined: a store may not keep "absent" and "undefined" apart. */
function plain(events: readonly AuditEvent[]): AuditEvent[] {
  return events.map((event) => JSON.parse(JSON.stringify(event)) as AuditEvent);
}

/**
 * The `ReadableAuditSink` contract: append-only, read back in append order, filters by call
 * and trace ID, a limit bounds the answer; concurrent and cross-process appends are all kept
 * (each process's own order preserved); an outage fails closed.
 */
export function describeAuditSinkConformance<H extends OpenedStore<ReadableAuditSink>>(
  name: string,
  factory: StoreFactory<ReadableAuditSink, H>,
): void {
  const { use, check, crossProcess, skipNote, outageCase, outageNote } = suiteCases(factory);

  describe(`AuditSink conformance: ${name}`, () => {
    check("reads back every event in append order", () =>
      use(async ({ store }) => {
        const events = Array.from({ length: 20 }, (_, i) => auditEvent(i));
        for (const event of events) await store.append(event);
        expect(plain(await store.read())).toEqual(plain(events));
      }),
    );

    check("filters by callId and traceId; a limit keeps the first events", () =>
      use(async ({ store }) => {
        const events = Array.from({ length: 12 }, (_, i) => auditEvent(i));
        for (const event of events) await store.append(event);
        expect(plain(await store.read({ callId: "call-4" }))).toEqual(
          plain([events[4] as AuditEvent]),
        );
        expect(plain(await store.read({ traceId: "trace-1" }))).toEqual(
          plain(events.filter((e) => e.traceId === "trace-1")),
        );
        expect(await store.read({ callId: "nothing" })).toEqual([]);
        // Every Tessera sink answers the oldest events first, so a limit keeps the first ones.
        expect(plain(await store.read({ limit: 5 }))).toEqual(plain(events.slice(0, 5)));
        expect(plain(await store.read({ traceId: "trace-1", limit: 2 }))).toEqual(
          plain(events.filter((e) => e.traceId === "trace-1").slice(0, 2)),
        );
        expect(await store.read({ limit: 0 })).toEqual([]);
      }),
    );

    check("read refuses a malformed filter with invalid_input", () =>
      use(async ({ store }) => {
        await store.append(auditEvent(0));
        const bad = [
          { limit: -1 },
          { limit: 1.5 },
          { limit: Number.NaN },
          { limit: "2" },
          { callId: 5 },
          { traceId: {} },
        ];
        for (const filter of bad as Parameters<typeof store.read>[0][]) {
          await expectCode(() => store.read(filter), ["invalid_input"]);
        }
        expect(await store.read({ limit: 1 })).toHaveLength(1);
      }),
    );

    check("is append-only: changing what read returned changes nothing stored", () =>
      use(async ({ store }) => {
        await store.append(auditEvent(0));
        const first = (await store.read()) as AuditEvent[];
        try {
          (first[0] as { callId: string }).callId = "tampered";
          first.length = 0;
        } catch {
          // Frozen results are fine too.
        }
        expect(plain(await store.read())).toEqual(plain([auditEvent(0)]));
      }),
    );

    check("hostile and oversize fields are kept exactly or refused with invalid_input", () =>
      use(async ({ store }) => {
        const hostile = HOSTILE_KEYS.map((key, i) =>
          auditEvent(i, { callId: key, traceId: key, detail: key, actor: key }),
        );
        for (const event of hostile) await store.append(event);
        for (const event of hostile) {
          expect(plain(await store.read({ callId: event.callId }))).toEqual(plain([event]));
        }
        const big = auditEvent(99, { detail: oversize("ü") });
        const outcome = await resultOrCode(
          () => Promise.resolve(store.append(big)),
          ["invalid_input", "audit_unavailable"],
        );
        if (outcome.ok) {
          expect(plain(await store.read({ callId: "call-99" }))).toEqual(plain([big]));
        }
        await store.append(auditEvent(100));
        expect(await store.read({ callId: "call-100" })).toHaveLength(1);
      }),
    );

    check("64 concurrent appends are all kept", () =>
      use(async ({ store }) => {
        await Promise.all(
          Array.from({ length: 64 }, (_, i) => Promise.resolve(store.append(auditEvent(i)))),
        );
        const ids = (await store.read()).map((e) => e.callId);
        expect(new Set(ids).size).toBe(64);
      }),
    );

    crossProcess(
      `8 OS processes append ${PER_PROCESS} events each: all kept, each process's order preserved${skipNote}`,
      () =>
        use(async (opened) => {
          const spec = factory.processSpec?.(opened);
          if (!spec) throw new Error("unreachable: guarded by processSpec");
          await raceInProcesses(spec, 8, (worker) => ({
            kind: "append",
            events: Array.from({ length: PER_PROCESS }, (_, i) =>
              auditEvent(i, { callId: `p${worker}-${i}`, traceId: `p${worker}` }),
            ),
          }));
          const events = await opened.store.read();
          expect(events).toHaveLength(8 * PER_PROCESS);
          for (let worker = 0; worker < 8; worker++) {
            const mine = events.filter((e) => e.traceId === `p${worker}`).map((e) => e.callId);
            expect(mine).toEqual(Array.from({ length: PER_PROCESS }, (_, i) => `p${worker}-${i}`));
          }
        }),
    );

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
      }),
    );
  });
}
