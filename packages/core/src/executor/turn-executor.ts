import { TesseraError } from "../contracts/errors.js";
import type { AccessContext } from "../contracts/schemas.js";
import type { Kernel, TurnTools } from "../kernel/types.js";

/** What a driver (a model loop, a script) gets for each step. */
export interface StepContext {
  /** Zero-based index of this step within the turn. */
  readonly step: number;
  /** Aborted when the turn times out or its caller aborts; the lease is closed right after. */
  readonly signal: AbortSignal;
}

/** Drives one turn, one step at a time, through the turn's tools (it cannot close the lease). */
export interface TurnDriver {
  step(tools: TurnTools, context: StepContext): Promise<"continue" | "done">;
}

export interface TurnExecutorOptions {
  /**
   * Wall-clock budget of the whole turn, in milliseconds: more than 0 and at most
   * 2,147,483,647 (about 24.8 days, the longest a Node.js timer waits; a longer one would fire
   * at once), else `invalid_config`.
   */
  readonly deadlineMs: number;
  /** Most steps the driver may take in one turn. */
  readonly maxSteps: number;
}

export interface TurnOutcome {
  readonly status: "completed" | "step_budget_exhausted" | "timed_out" | "aborted";
  readonly steps: number;
  readonly traceId: string;
}

/**
 * What the executor's own stop signal resolves to in the race against a step. Private to this
 * module, so no value a driver returns can pass for it; why the turn stopped is kept apart.
 */
const STOPPED: unique symbol = Symbol("turn stopped");

/** The longest delay a Node.js timer keeps (2^31 - 1 ms); a longer one fires after 1 ms. */
const MAX_DEADLINE_MS = 2_147_483_647;

/**
 * Runs each turn inside exactly one authority lease and closes it on every exit path: the
 * driver finishing, running out of steps, throwing (the error is rethrown after the close),
 * the deadline passing or the caller aborting. On a timeout or abort the lease is closed while
 * the step may still be running, so anything it tries afterwards is refused `turn_closed`.
 * A step that resolves to anything but `"continue"` or `"done"` is a broken or hostile driver,
 * not an outcome: the turn fails closed with `invalid_request`, thrown after the close.
 */
export class TurnExecutor {
  readonly #kernel: Kernel;
  readonly #options: TurnExecutorOptions;

  constructor(kernel: Kernel, options: TurnExecutorOptions) {
    if (!(options.deadlineMs > 0) || !Number.isInteger(options.maxSteps) || options.maxSteps < 1) {
      throw new TesseraError("invalid_config", "a turn needs a positive deadline and step budget");
    }
    // setTimeout fires after 1 ms for any delay past its 32-bit bound (Infinity included): such
    // a deadline would end every turn at once as timed_out.
    if (options.deadlineMs > MAX_DEADLINE_MS) {
      throw new TesseraError(
        "invalid_config",
        `a turn's deadline is at most ${MAX_DEADLINE_MS} ms (about 24.8 days)`,
      );
    }
    this.#kernel = kernel;
    this.#options = Object.freeze({ ...options });
  }

  async run(
    ctx: AccessContext,
    driver: TurnDriver,
    options: { signal?: AbortSignal } = {},
  ): Promise<TurnOutcome> {
    const turn = await this.#kernel.openTurnAuthority(ctx);
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    let stopReason: "timed_out" | "aborted" = "aborted";
    const stopped = new Promise<typeof STOPPED>((resolve) => {
      const stop = (reason: typeof stopReason) => {
        stopReason = reason;
        resolve(STOPPED);
      };
      timer = setTimeout(() => stop("timed_out"), this.#options.deadlineMs);
      onAbort = () => stop("aborted");
      if (options.signal?.aborted) onAbort();
      else options.signal?.addEventListener("abort", onAbort, { once: true });
    });
    const tools: TurnTools = Object.freeze<TurnTools>({
      listTools: () => turn.listTools(),
      sendMessage: (request) => turn.sendMessage(request),
      authorize: (request) => turn.authorize(request),
    });
    const outcome = (status: TurnOutcome["status"], steps: number): TurnOutcome =>
      Object.freeze({ status, steps, traceId: turn.traceId });
    try {
      let steps = 0;
      for (;;) {
        if (options.signal?.aborted) return outcome("aborted", steps);
        if (steps >= this.#options.maxSteps) return outcome("step_budget_exhausted", steps);
        // Whatever the driver hands back (a promise, a plain value, a thenable) is awaited
        // as one promise, so an abandoned step can always be silenced below.
        const step: Promise<unknown> = Promise.resolve(
          driver.step(tools, { step: steps, signal: controller.signal }),
        );
        const result = await Promise.race([step, stopped]);
        if (result === STOPPED) {
          // The abandoned step may still settle; its rejection is not the turn's outcome.
          step.catch(() => undefined);
          controller.abort();
          return outcome(stopReason, steps);
        }
        if (result !== "continue" && result !== "done") {
          controller.abort();
          throw new TesseraError(
            "invalid_request",
            'a turn step must resolve to "continue" or "done"; the turn was ended',
          );
        }
        steps++;
        if (result === "done") return outcome("completed", steps);
      }
    } finally {
      clearTimeout(timer);
      if (onAbort) options.signal?.removeEventListener("abort", onAbort);
      await turn.close();
    }
  }
}
