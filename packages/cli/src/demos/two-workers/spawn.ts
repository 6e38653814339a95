import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import type { WorkerConfig, WorkerOutcome } from "./protocol.js";

const WORKER_SCRIPT = new URL("./worker.js", import.meta.url);

/** A demo worker OS process, running the compiled `worker.js` beside this module. */
export class DemoWorker {
  readonly #child: ChildProcess;
  readonly #lines: string[] = [];
  readonly #waiting: (() => void)[] = [];
  #stderr = "";
  #exitCode: number | null | undefined;
  readonly exited: Promise<number | null>;

  constructor(config: WorkerConfig) {
    this.#child = spawn(process.execPath, [WORKER_SCRIPT.pathname], {
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.#child.stdin?.write(`${JSON.stringify(config)}\n`);
    createInterface({ input: this.#child.stdout as NodeJS.ReadableStream }).on("line", (line) => {
      this.#lines.push(line);
      this.#wakeAll();
    });
    this.#child.stderr?.on("data", (chunk) => {
      this.#stderr += String(chunk);
    });
    this.exited = new Promise((resolve) =>
      this.#child.on("close", (code) => {
        this.#exitCode = code;
        this.#wakeAll();
        resolve(code);
      }),
    );
  }

  get pid(): number | undefined {
    return this.#child.pid;
  }

  /** The first output line `test` accepts; fails if the worker exits without printing it. */
  async line(test: (line: string) => boolean): Promise<string> {
    for (;;) {
      const found = this.#lines.find(test);
      if (found !== undefined) return found;
      if (this.#exitCode !== undefined) {
        throw new Error(
          `demo worker exited (${this.#exitCode}): ${this.#stderr.trim().slice(0, 1000)}`,
        );
      }
      await new Promise<void>((resolve) => this.#waiting.push(resolve));
    }
  }

  ready(): Promise<string> {
    return this.line((line) => line === "ready");
  }

  #wakeAll(): void {
    for (const wake of this.#waiting.splice(0)) wake();
  }

  /** Releases the worker from the barrier. */
  go(): void {
    this.#child.stdin?.write("go\n");
  }

  async outcome(): Promise<WorkerOutcome> {
    const outcome = JSON.parse(await this.line((line) => line.startsWith("{"))) as WorkerOutcome;
    const code = await this.exited;
    if (code !== 0) throw new Error(`demo worker exited with code ${code}`);
    return outcome;
  }

  kill(signal: NodeJS.Signals = "SIGKILL"): Promise<number | null> {
    if (this.#exitCode === undefined) this.#child.kill(signal);
    return this.exited;
  }
}
