/**
 * The gate task, on the worker side: one `FunctionCallGate` per OS process over the claim
 * store this process opened, and nothing else shared with the other workers.
 *
 * `@tessera/a2ui` is imported only here and only when a gate task runs, so the store suites'
 * workers need no gate installed (it is an optional peer of the testkit).
 */
import { appendFileSync } from "node:fs";
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
  const gate = new FunctionCallGate({
    claims,
    catalog: GATE_CATALOG,
    invoke: (call) => {
      // Synchronous append: the line is in the file before the gate settles the claim.
      appendFileSync(
        task.callbacksFile,
        `${JSON.stringify([call.session, call.functionCallId, process.pid])}\n`,
      );
      return (call.args.a as number) + (call.args.b as number);
    },
    approve: task.hangAfterClaim
      ? async () => {
          await send({ type: "claimed" });
          return new Promise<boolean>(() => {});
        }
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
  return outcomes;
}
