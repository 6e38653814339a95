/**
 * Gate workers: one A2UI `FunctionCallGate` per OS process, each over its own connection to
 * the claim store a `ProcessSpec` opens (a directory, a database URL) and nothing else, all
 * released together. Every callback appends a line to a file, so the count of callbacks is
 * what the processes ran, not what they reported. The a2ui race and crash tests and the
 * gate-workers suite every shared backend runs all go through here.
 *
 * The two-workers demo (`tessera demo two-workers`) keeps its own worker on purpose: it is
 * product code in a published CLI, and a published package cannot depend on a test kit.
 */
import { readFileSync } from "node:fs";
import type { ProcessSpec } from "./factory.js";
import { raceInProcesses, WorkerProcess } from "./processes.js";
import type { GateCall, GateOutcome, WorkerResult } from "./worker-protocol.js";

export type { GateCall, GateOutcome } from "./worker-protocol.js";

/** What one gate worker process is given to handle once every worker is ready. */
export interface GateWorkerPlan {
  readonly calls: readonly GateCall[];
  /** How many of its calls a worker keeps in progress at once (default 1). */
  readonly inFlight?: number;
}

export interface GateWorkersOptions {
  /** How each worker opens the shared claim store (the testkit's `ProcessSpec`). */
  readonly spec: ProcessSpec;
  /** The file the callbacks append to; read it with `readGateCallbacks`. */
  readonly callbacksFile: string;
  /** One entry per worker process. */
  readonly workers: readonly GateWorkerPlan[];
}

/** A callback a worker really ran. */
export interface GateCallback {
  readonly session: string;
  readonly functionCallId: string;
  readonly pid: number;
}

function outcomesOf(result: WorkerResult): GateOutcome[] {
  if (result.kind !== "gate") throw new Error(`gate worker answered a ${result.kind} result`);
  return result.outcomes;
}

/**
 * Starts one OS process per plan, waits until every one has opened the store (the start
 * barrier), releases them together and returns each worker's outcomes, in call order. A
 * worker that fails, or does not exit cleanly after answering, fails the run.
 */
export async function runGateWorkers(options: GateWorkersOptions): Promise<GateOutcome[][]> {
  const results = await raceInProcesses(options.spec, options.workers.length, (index) => ({
    kind: "gate",
    ...(options.workers[index] as GateWorkerPlan),
    callbacksFile: options.callbacksFile,
  }));
  return results.map(outcomesOf);
}

/**
 * One gate worker handles `call` and is killed with SIGKILL after its claim is stored and
 * before its callback (inside the approval hook): the crash the gate must leave in doubt.
 */
export async function killGateWorkerAfterClaim(options: {
  readonly spec: ProcessSpec;
  readonly callbacksFile: string;
  readonly call: GateCall;
}): Promise<void> {
  const worker = await WorkerProcess.start(options.spec);
  try {
    worker.run({
      kind: "gate",
      calls: [options.call],
      callbacksFile: options.callbacksFile,
      hangAfterClaim: true,
    });
    await worker.expect("claimed");
  } finally {
    await worker.killHard();
  }
}

/** Every callback the workers ran so far, in the order they ran (none if the file is absent). */
export function readGateCallbacks(callbacksFile: string): GateCallback[] {
  let text: string;
  try {
    text = readFileSync(callbacksFile, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw error;
  }
  return text
    .split("\n")
    .filter(Boolean)
    .map((line) => {
      const [session, functionCallId, pid] = JSON.parse(line) as [string, string, number];
      return { session, functionCallId, pid };
    });
}
