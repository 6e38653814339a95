import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { ProcessSpec } from "./factory.js";
import type { FromWorker, WorkerResult, WorkerTask } from "./worker-protocol.js";

const WORKER = fileURLToPath(new URL("./worker.js", import.meta.url));

/** One child OS process holding its own connection to the store under test. */
export class WorkerProcess {
  readonly #child: ChildProcess;
  readonly #messages: FromWorker[] = [];
  readonly #waiters: (() => void)[] = [];
  readonly #exit: Promise<number | null>;
  #exited = false;
  #stderr = "";

  private constructor(child: ChildProcess) {
    this.#child = child;
    child.on("message", (message: FromWorker) => {
      this.#messages.push(message);
      this.#wake();
    });
    child.stderr?.on("data", (chunk: Buffer) => {
      this.#stderr = (this.#stderr + chunk.toString()).slice(-4000);
    });
    // "close", not "exit": Node may emit "exit" before the last IPC messages are delivered,
    // so a worker that sends its result and exits at once read as "exited before done".
    // "close" comes after every stdio stream, the IPC channel included, has ended.
    this.#exit = new Promise((resolve) =>
      child.on("close", (code) => {
        this.#exited = true;
        this.#wake();
        resolve(code);
      }),
    );
  }

  /** Starts plain `node worker.js` (no loaders, no vitest) and opens the store in it. */
  static async start(spec: ProcessSpec): Promise<WorkerProcess> {
    const child = fork(WORKER, [], {
      execArgv: [],
      stdio: ["ignore", "ignore", "pipe", "ipc"],
      serialization: "json",
    });
    const worker = new WorkerProcess(child);
    child.send({ type: "open", spec });
    await worker.expect("ready");
    return worker;
  }

  get pid(): number | undefined {
    return this.#child.pid;
  }

  /** Sends the task; the caller then awaits `expect("done")` or another message. */
  run(task: WorkerTask): void {
    this.#child.send({ type: "run", task });
  }

  /** The task's result, once the worker has also exited cleanly (it exits right after). */
  async result(): Promise<WorkerResult> {
    const message = await this.expect("done");
    const code = await this.#exit;
    if (code !== 0) throw new Error(`worker ${this.pid} exited with ${code} after its result`);
    return (message as Extract<FromWorker, { type: "done" }>).result;
  }

  /** Waits for the next message of `type`; a failure report or an early exit throws. */
  async expect(type: FromWorker["type"]): Promise<FromWorker> {
    for (;;) {
      const message = this.#messages.shift();
      if (message?.type === type) return message;
      if (message?.type === "failed") {
        throw Object.assign(new Error(`worker ${this.pid} failed: ${message.message}`), {
          code: message.code,
        });
      }
      if (message) throw new Error(`worker ${this.pid} sent ${message.type}, expected ${type}`);
      if (this.#exited) {
        throw new Error(`worker ${this.pid} exited before ${type}; stderr: ${this.#stderr}`);
      }
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
  }

  /** kill -9: no handler runs, nothing is flushed or settled. Resolves once it is gone. */
  async killHard(): Promise<void> {
    if (!this.#exited) this.#child.kill("SIGKILL");
    await this.#exit;
  }

  #wake(): void {
    for (const wake of this.#waiters.splice(0)) wake();
  }
}

/**
 * Starts `count` workers, waits until every one has opened the store, then releases them
 * together so their operations really overlap; returns every result.
 */
export async function raceInProcesses(
  spec: ProcessSpec,
  count: number,
  taskFor: (index: number) => WorkerTask,
): Promise<WorkerResult[]> {
  const started = await Promise.allSettled(
    Array.from({ length: count }, () => WorkerProcess.start(spec)),
  );
  const workers = started.flatMap((outcome) =>
    outcome.status === "fulfilled" ? [outcome.value] : [],
  );
  const failed = started.find((outcome) => outcome.status === "rejected");
  if (failed) {
    // One worker could not open the store: stop the others rather than leave them waiting.
    await Promise.all(workers.map((worker) => worker.killHard()));
    throw failed.reason;
  }
  try {
    workers.forEach((worker, index) => {
      worker.run(taskFor(index));
    });
    return await Promise.all(workers.map((worker) => worker.result()));
  } finally {
    await Promise.all(workers.map((worker) => worker.killHard()));
  }
}
