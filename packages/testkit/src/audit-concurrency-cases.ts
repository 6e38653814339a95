import type { ReadableAuditSink } from "@tessera/core";
import { expect } from "vitest";
import { auditEvent, expectOneChain, seqsOf, upTo } from "./audit-fixtures.js";
import { type OpenedStore, type StoreFactory, suiteCases } from "./factory.js";
import { raceInProcesses } from "./processes.js";

/** Appends per process in the cross-process case: enough to interleave, cheap on fsync. */
const PER_PROCESS = 40;
/** Rounds of the cross-process race on the same store: later rounds link to a long chain. */
const ROUNDS = 2;
/** The cross-process case starts 8 processes per round: on a loaded machine, minutes. */
const ROUNDS_TIMEOUT_MS = 180_000;

/**
 * Many writers at once, in one process and in many: every append is kept, each process's own
 * order preserved, and each stream still one chain. Cases of `describeAuditSinkConformance`,
 * declared in its `describe`.
 */
export function auditConcurrencyCases<H extends OpenedStore<ReadableAuditSink>>(
  factory: StoreFactory<ReadableAuditSink, H>,
): void {
  const { use, check, crossProcess, skipNote } = suiteCases(factory);

  check("64 concurrent appends are all kept, in one chain per stream", () =>
    use(async ({ store }) => {
      await Promise.all(
        Array.from({ length: 64 }, (_, i) =>
          Promise.resolve(store.append(auditEvent(i, { namespaceId: i % 4 === 0 ? "b" : "a" }))),
        ),
      );
      const read = await store.read();
      expect(new Set(read.map((e) => e.callId)).size).toBe(64);
      expect(seqsOf(read, "a")).toEqual(upTo(48));
      expect(seqsOf(read, "b")).toEqual(upTo(16));
      expectOneChain(read);
    }),
  );

  crossProcess(
    `8 OS processes append ${PER_PROCESS} events each, ${ROUNDS} rounds: all kept, each process's order preserved, one chain per stream${skipNote}`,
    () =>
      use(async (opened) => {
        const spec = factory.processSpec?.(opened);
        if (!spec) throw new Error("unreachable: guarded by processSpec");
        for (let round = 0; round < ROUNDS; round++) {
          // Two streams, both written by every process at once.
          await raceInProcesses(spec, 8, (worker) => ({
            kind: "append",
            events: Array.from({ length: PER_PROCESS }, (_, i) =>
              auditEvent(i, {
                callId: `r${round}-p${worker}-${i}`,
                traceId: `r${round}-p${worker}`,
                namespaceId: i % 2 === 0 ? "even" : "odd",
              }),
            ),
          }));
          const events = await opened.store.read();
          expect(events).toHaveLength(8 * PER_PROCESS * (round + 1));
          for (let worker = 0; worker < 8; worker++) {
            const mine = events
              .filter((e) => e.traceId === `r${round}-p${worker}`)
              .map((e) => e.callId);
            expect(mine).toEqual(
              Array.from({ length: PER_PROCESS }, (_, i) => `r${round}-p${worker}-${i}`),
            );
          }
          const perStream = 4 * PER_PROCESS * (round + 1);
          expect(seqsOf(events, "even")).toEqual(upTo(perStream));
          expect(seqsOf(events, "odd")).toEqual(upTo(perStream));
          expectOneChain(events);
        }
      }),
    ROUNDS_TIMEOUT_MS,
  );
}
