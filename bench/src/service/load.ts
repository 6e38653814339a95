import { type ChildProcess, fork } from "node:child_process";

/**
 * What one slice of load sends, as plain data: the load runs in a child process (see
 * `client.ts`), so the client never shares the measured server's event loop or CPU time
 * slice, and both sides of every ratio are loaded alike.
 * - `denied`: a send to a recipient nobody holds a ticket for, no call ID;
 * - `allowed`: a send to `colleague` with a fresh call ID per request (`${tag}-${n}`);
 * - `a2ui`: an A2UI claim then its settle, per connection, in turn.
 */
export interface LoadSpec {
  readonly url: string;
  readonly shape: "denied" | "allowed" | "a2ui";
  /** Makes every call ID of the slice new: a slice never replays an earlier one's. */
  readonly tag: string;
  readonly connections: number;
  readonly ms: number;
  /** The bearer token sent; the static principal's (`bench-service-token`) when absent. */
  readonly token?: string;
}

export interface LoadResult {
  /** Answered requests per second (every answer must be a 2xx, or the run fails). */
  readonly rate: number;
  readonly p50: number;
  readonly p99: number;
}

type Reply = { ok: true; result: LoadResult } | { ok: false; message: string };

/** The load generator: one child process, one slice at a time. */
export class LoadClient {
  readonly #child: ChildProcess;
  #next: ((reply: Reply) => void) | undefined;

  constructor() {
    this.#child = fork(new URL("./client.js", import.meta.url), [], { stdio: "inherit" });
    this.#child.on("message", (reply) => {
      const next = this.#next;
      this.#next = undefined;
      next?.(reply as Reply);
    });
    this.#child.on("exit", (code) => {
      this.#next?.({ ok: false, message: `load client exited with ${code}` });
      this.#next = undefined;
    });
  }

  async run(spec: LoadSpec): Promise<LoadResult> {
    if (this.#next !== undefined) throw new Error("bench: one load slice at a time");
    const reply = await new Promise<Reply>((resolve) => {
      this.#next = resolve;
      this.#child.send(spec);
    });
    if (!reply.ok) throw new Error(reply.message);
    return reply.result;
  }

  close(): Promise<void> {
    if (this.#child.exitCode !== null) return Promise.resolve();
    return new Promise((resolve) => {
      this.#child.once("exit", () => resolve());
      this.#child.kill();
    });
  }
}
