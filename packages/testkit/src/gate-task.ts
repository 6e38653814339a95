/**
 * The gate task, on the worker side: one `FunctionCallGate` per OS process over the claim
 * store this process opened, and nothing else shared with the other workers.
 *
 * `@tessera/a2ui` is imported only here and only when a gate task runs, so the store suites'
 * workers need no gate installed (it is an optional peer of the testkit).
 */
import { appendFileSync, fsyncSync, openSync, writeSync } from "node:fs";
import type { ClaimStore } from "@tessera/core";
import { GATE_CATALOG } from "./gate-catalog.js";
import type { FromWorker, GateOutcome, GateTask } from "./worker-protocol.js";

interface Reply {
  readonly error?: { readonly code?: string; readonly functionCallId?: string };
  readonly rendererFunctionResponse?: {
    readonly functionCallId?: string;
    readonly error?: { readonly code?: string };
  };
}

function outcomeOf(reply: Reply, receipt: { status: string; reason: string }): GateOutcome {
  const response = reply.rendererFunctionResponse;
  return {
    status: receipt.status,
    reason: receipt.reason,
    code: reply.error?.code ?? response?.error?.code ?? null,
    functionCallId: response?.functionCallId ?? reply.error?.functionCallId ?? null,
  };
}

export async function runGateTask(
  claims: ClaimStore,
  task: GateTask,
  send: (message: FromWorker) => Promise<void>,
): Promise<GateOutcome[]> {
  const { FunctionCallGate } = await import("@tessera/a2ui");
  const record = callbackRecorder(task);
  const gate = new FunctionCallGate({
    claims: task.settleDelayMs ? delayedSettles(claims, task.settleDelayMs) : claims,
    catalog: GATE_CATALOG,
    ...(task.settle === undefined ? {} : { settle: task.settle }),
    invoke: (call) => {
      // Written before the callback returns, so before the gate can settle the claim.
      record(call.session, call.functionCallId);
      if (task.mixedOutcomes && call.functionCallId.startsWith("fail-")) {
        throw new Error("the callback failed after it ran");
      }
      return (call.args.a as number) + (call.args.b as number);
    },
    approve: task.hangAfterClaim
      ? async () => {
          await send({ type: "claimed" });
          return new Promise<boolean>(() => {});
        }
      : task.mixedOutcomes
        ? (call) => !call.functionCallId.startsWith("deny-")
        : undefined,
  });
  const outcomes: GateOutcome[] = new Array(task.calls.length);
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < task.calls.length) {
      const index = next++;
      const [session, message] = task.calls[index] as GateTask["calls"][number];
      const { reply, receipt } = await gate.handle(session, message);
      outcomes[index] = outcomeOf(reply as Reply, receipt);
    }
  };
  await Promise.all(Array.from({ length: task.inFlight ?? 1 }, lane));
  // What a host does before it exits: every receipt written (or given up) first.
  await gate.close();
  return outcomes;
}

/** Appends one line per callback run; O_APPEND, so lines of concurrent processes never mix. */
function callbackRecorder(task: GateTask): (session: string, functionCallId: string) => void {
  if (!task.syncCallbacks) {
    return (session, functionCallId) =>
      appendFileSync(
        task.callbacksFile,
        `${JSON.stringify([session, functionCallId, process.pid])}\n`,
      );
  }
  const fd = openSync(task.callbacksFile, "a");
  return (session, functionCallId) => {
    writeSync(fd, `${JSON.stringify([session, functionCallId, process.pid])}\n`);
    fsyncSync(fd);
  };
}

/** The same store, each settle held back a random while: the store is untouched otherwise. */
function delayedSettles(claims: ClaimStore, maxMs: number): ClaimStore {
  return {
    claim: (key, record) => claims.claim(key, record),
    settle: async (key, receipt) => {
      await new Promise((resolve) => setTimeout(resolve, Math.random() * maxMs));
      await claims.settle(key, receipt);
    },
    get: (key) => claims.get(key),
    listInDoubt: (session) => claims.listInDoubt(session),
    endSession: (session) => claims.endSession(session),
    close: () => claims.close(),
  };
}
