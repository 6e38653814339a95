import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ClaimStore } from "@tessera/core";
import { describe, expect } from "vitest";
import { type OpenedStore, type ProcessSpec, type StoreFactory, suiteCases } from "./factory.js";
import { gateCallMessage } from "./gate-catalog.js";
import {
  type GateOutcome,
  killGateWorkerAfterClaim,
  readGateCallbacks,
  runGateWorkers,
} from "./gate-workers.js";

const WORKERS = 4;
const CALL_ID = "call-42";

async function withCallbacksFile<T>(body: (file: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), "tessera-gate-workers-"));
  try {
    return await body(join(dir, "callbacks.jsonl"));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function refusal(functionCallId: string): GateOutcome {
  return {
    status: "none",
    reason: "duplicate_call",
    code: "INVALID_FUNCTION_CALL",
    functionCallId,
  };
}

function dispatched(functionCallId: string): GateOutcome {
  return { status: "dispatched", reason: "dispatched", code: null, functionCallId };
}

/**
 * Across machines, in miniature: A2UI gate workers in separate OS processes that share
 * nothing but the claim store, released together. One callback per (trusted session,
 * functionCallId), counted from what the processes ran; the losers get a correlated
 * `INVALID_FUNCTION_CALL`; a worker killed between claim and callback leaves the call in
 * doubt for every process. Needs the factory's `processSpec` (skipped, and says so, without
 * it) and `@tessera/a2ui` installed beside the testkit.
 */
export function describeGateWorkersConformance<H extends OpenedStore<ClaimStore>>(
  name: string,
  factory: StoreFactory<ClaimStore, H>,
): void {
  const { use, crossProcess, skipNote } = suiteCases(factory);
  const specOf = (opened: H): ProcessSpec => {
    const spec = factory.processSpec?.(opened);
    if (!spec) throw new Error("unreachable: guarded by processSpec");
    return spec;
  };

  describe(`gate workers sharing only ${name}`, () => {
    crossProcess(
      `${WORKERS} OS processes, one session, one call ID: one callback, ${WORKERS - 1} correlated refusals${skipNote}`,
      () =>
        use(async (opened) => {
          const session = "host-session-1";
          await withCallbacksFile(async (callbacksFile) => {
            const outcomes = await runGateWorkers({
              spec: specOf(opened),
              callbacksFile,
              workers: Array.from({ length: WORKERS }, () => ({
                calls: [[session, gateCallMessage(CALL_ID)]],
              })),
            });
            const ran = readGateCallbacks(callbacksFile);
            expect(ran.map((c) => [c.session, c.functionCallId])).toEqual([[session, CALL_ID]]);
            const all = outcomes.flat();
            expect(all.filter((o) => o.status === "dispatched")).toEqual([dispatched(CALL_ID)]);
            expect(all.filter((o) => o.status !== "dispatched")).toEqual(
              Array.from({ length: WORKERS - 1 }, () => refusal(CALL_ID)),
            );
          });
          // This process's own connection sees the one claim, settled: nothing left in doubt.
          const stored = await opened.store.get({ session, functionCallId: CALL_ID });
          expect(stored?.receipt?.status).toBe("dispatched");
          expect(await opened.store.listInDoubt(session)).toEqual([]);
        }),
    );

    crossProcess(
      `two trusted sessions may use the same call ID: one callback each${skipNote}`,
      () =>
        use(async (opened) => {
          await withCallbacksFile(async (callbacksFile) => {
            const sessions = ["session-a", "session-b", "session-a", "session-b"];
            const outcomes = await runGateWorkers({
              spec: specOf(opened),
              callbacksFile,
              workers: sessions.map((session) => ({
                calls: [[session, gateCallMessage(CALL_ID)]],
              })),
            });
            const ran = readGateCallbacks(callbacksFile);
            expect(ran.map((c) => c.session).sort()).toEqual(["session-a", "session-b"]);
            for (const session of ["session-a", "session-b"]) {
              const mine = outcomes.filter((_, index) => sessions[index] === session).flat();
              expect(mine.filter((o) => o.status === "dispatched")).toEqual([dispatched(CALL_ID)]);
              expect(mine.filter((o) => o.status !== "dispatched")).toEqual([refusal(CALL_ID)]);
            }
          });
        }),
    );

    crossProcess(
      `a worker killed between claim and callback: in doubt, refused by a fresh worker, other sessions independent${skipNote}`,
      () =>
        use(async (opened) => {
          const spec = specOf(opened);
          const key = { session: "session-a", functionCallId: "victim" };
          await withCallbacksFile(async (callbacksFile) => {
            await killGateWorkerAfterClaim({
              spec,
              callbacksFile,
              call: [key.session, gateCallMessage(key.functionCallId)],
            });
            const inDoubt = await opened.store.listInDoubt(key.session);
            expect(inDoubt).toMatchObject([key]);
            expect(inDoubt[0]?.receipt).toBeUndefined();

            const [late] = await runGateWorkers({
              spec,
              callbacksFile,
              workers: [
                {
                  calls: [
                    [key.session, gateCallMessage(key.functionCallId)],
                    ["session-b", gateCallMessage(key.functionCallId)],
                  ],
                },
              ],
            });
            expect(late).toEqual([refusal(key.functionCallId), dispatched(key.functionCallId)]);
            expect(readGateCallbacks(callbacksFile).map((c) => c.session)).toEqual(["session-b"]);
            // Never re-dispatched, never settled by another worker: still in doubt.
            expect(await opened.store.listInDoubt(key.session)).toMatchObject([key]);
          });
        }),
    );
  });
}
