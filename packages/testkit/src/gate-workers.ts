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
import type { GateCall, GateOutcome, GateTask, WorkerResult } from "./worker-protocol.js";

export type { GateCall, GateOutcome } from "./worker-protocol.js";

/**
 * What one gate worker process is given to handle once every worker is ready: its calls,
 * how many in progress at once (default 1), and the gate task's settings (`GateTask`).
 */
export type GateWorkerPlan = Omit<GateTask, "kind" | "callbacksFile" | "hangAfterClaim">;

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

/** When `killGateWorkersMidway` pulls the plug. */
export interface KillPoint {
  /** Once this many more callbacks have run (counted from the file) … */
  readonly afterCallbacks: number;
  /** … each worker in turn is killed after a further random 0..jitterMs ms. */
  readonly jitterMs: number;
}

/**
 * Starts one gate worker per plan, releases them together and kills each with SIGKILL at
 * `killAt` (a worker that finished first has exited by itself). Returns how many finished
 * and how many were killed. A worker that reports a failure fails the run: a kill is the
 * only way a worker may stop short.
 */
export async function killGateWorkersMidway(options: {
  readonly spec: ProcessSpec;
  readonly callbacksFile: string;
  readonly workers: readonly GateWorkerPlan[];
  readonly killAt: KillPoint;
}): Promise<{ finished: number; killed: number }> {
  const started = await Promise.allSettled(
    options.workers.map(() => WorkerProcess.start(options.spec)),
  );
  const workers = started.flatMap((s) => (s.status === "fulfilled" ? [s.value] : []));
  try {
    const failed = started.find((s) => s.status === "rejected");
    if (failed) throw failed.reason;
    const before = readGateCallbacks(options.callbacksFile).length;
    let ended = 0;
    const ends = workers.map((worker) =>
      worker
        .expect("done")
        .then(
          () => "finished" as const,
          (error: Error) => error,
        )
        .finally(() => ended++),
    );
    workers.forEach((worker, index) => {
      const plan = options.workers[index] as GateWorkerPlan;
      worker.run({ kind: "gate", ...plan, callbacksFile: options.callbacksFile });
    });
    const deadline = Date.now() + 30_000;
    while (
      ended < workers.length &&
      readGateCallbacks(options.callbacksFile).length - before < options.killAt.afterCallbacks &&
      Date.now() < deadline
    ) {
      await pause(5);
    }
    for (const worker of workers) {
      await pause(Math.random() * options.killAt.jitterMs);
      await worker.killHard();
    }
    let finished = 0;
    for (const end of await Promise.all(ends)) {
      if (end === "finished") finished++;
      // Killed before its result: expected. Anything else (a failure report) is a defect.
      else if (!end.message.includes("exited before done")) throw end;
    }
    return { finished, killed: workers.length - finished };
  } finally {
    await Promise.all(workers.map((worker) => worker.killHard()));
  }
}

function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
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
