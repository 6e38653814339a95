import {
  type ClaimKey,
  type ClaimReceipt,
  type ClaimStore,
  isTesseraError,
  type JsonValue,
} from "@tessera/core";
import { WriteWindow } from "@tessera/core/store-kit";

/**
 * When the gate writes a call's receipt (its settle):
 * - `"after-reply"` (default): the reply goes back as soon as the outcome is known and the
 *   receipt is written after it, with the receipts of the calls that reply within
 *   `SETTLE_WINDOW_MS`. The claim is the only write that must be durable before the
 *   callback runs; the receipt only records what already happened. If the process dies before
 *   the receipt lands, the claim reads `in_doubt`, which is the truth: the call may have run.
 *   A call then costs one durable write on its critical path instead of two, and the settles
 *   of a window reach the store together, where it can write them as one.
 * - `"before-reply"`: the reply waits until the receipt is written (or given up), as before
 *   0.2. For a host that reads receipts from the store right after each reply.
 */
export type SettleTiming = "after-reply" | "before-reply";

/** How one settle ended: the receipt landed, or it was given up and the claim stays in doubt. */
export type SettleOutcome =
  | { readonly recorded: true }
  | { readonly recorded: false; readonly attempts: number; readonly code: string };

/** Attempts per settle, and the pause before each retry. Settling is idempotent (the first
 * outcome stands), so a retry after an ambiguous failure cannot record a second outcome. */
const ATTEMPTS = 3;
const RETRY_PAUSES_MS = [20, 100] as const;

/** Codes a retry cannot cure: the store answered, and the answer was no. */
const FINAL_CODES = new Set(["invalid_input"]);

/**
 * How long an after-reply receipt may wait for others to leave with, and how many may wait.
 * Receipts that leave together reach the store in the same tick, where it sends them as one
 * statement, one script or one write instead of one round trip each; a receipt waits at most
 * this long after its reply (`drain()` sends at once). Dying inside the window leaves the
 * call in doubt, as dying before any after-reply write lands always did.
 */
export const SETTLE_WINDOW_MS = 10;
export const SETTLE_WINDOW_MAX = 256;

/**
 * The gate's receipt writer: every settle it starts is tracked until it ends, retried a
 * bounded number of times, and never rejects (a settle nobody awaits must not become an
 * unhandled rejection). `drain()` waits for every settle started before it was called.
 */
export class SettleQueue {
  readonly #claims: ClaimStore;
  /** Keyed by a sequence number, so a settle removes itself without a second promise. */
  readonly #pending = new Map<number, Promise<SettleOutcome>>();
  #next = 0;
  readonly #window = new WriteWindow(SETTLE_WINDOW_MS, SETTLE_WINDOW_MAX);

  constructor(claims: ClaimStore) {
    this.#claims = claims;
  }

  /**
   * Queues `receipt` for the current window: it is written with every receipt queued within
   * `SETTLE_WINDOW_MS` (or once `SETTLE_WINDOW_MAX` wait, or on `drain()`), so the settles of
   * calls that reply close together reach the store together. `onGiveUp` runs when the
   * receipt could not be written (a throw from it is swallowed: the claim reads in doubt either
   * way). `answer`, when given, is settled with the receipt (the claim's answer). Resolves once
   * the settle and `onGiveUp` have ended.
   */
  write(
    key: ClaimKey,
    receipt: ClaimReceipt,
    onGiveUp?: (outcome: SettleOutcome & { recorded: false }) => Promise<void>,
    answer?: JsonValue,
  ): Promise<SettleOutcome> {
    const id = this.#next++;
    const running = this.#window
      .join()
      .then(() => this.#first(id, { key, receipt, answer }, onGiveUp));
    this.#pending.set(id, running);
    return running;
  }

  /** Attempts 2.. of a settle whose first attempt (made by the caller) failed with `error`. */
  retry(
    key: ClaimKey,
    receipt: ClaimReceipt,
    error: unknown,
    answer?: JsonValue,
  ): Promise<SettleOutcome> {
    const id = this.#next++;
    const running = this.#retry(id, { key, receipt, answer }, error, undefined);
    this.#pending.set(id, running);
    return running;
  }

  /** How many settles have not ended yet. */
  get size(): number {
    return this.#pending.size;
  }

  /** Sends what waits now, then resolves once every settle started before it has ended. */
  async drain(): Promise<void> {
    this.#window.release();
    await Promise.all([...this.#pending.values()]);
  }

  /** The first attempt; retries only when it fails. */
  #first(
    id: number,
    settle: Settle,
    onGiveUp: ((outcome: SettleOutcome & { recorded: false }) => Promise<void>) | undefined,
  ): Promise<SettleOutcome> {
    let first: Promise<void>;
    try {
      first = this.#send(settle);
    } catch (error) {
      // A store that throws instead of rejecting is handled the same way.
      first = Promise.reject(error);
    }
    return first.then(
      () => {
        this.#pending.delete(id);
        return RECORDED;
      },
      (error: unknown) => this.#retry(id, settle, error, onGiveUp),
    );
  }

  /** Without an answer, the store's two-argument settle, exactly as before answers existed. */
  #send({ key, receipt, answer }: Settle): Promise<void> {
    return answer === undefined
      ? this.#claims.settle(key, receipt)
      : this.#claims.settle(key, receipt, answer);
  }

  async #retry(
    id: number,
    settle: Settle,
    first: unknown,
    onGiveUp: ((outcome: SettleOutcome & { recorded: false }) => Promise<void>) | undefined,
  ): Promise<SettleOutcome> {
    try {
      const outcome = await this.#attempts(settle, first);
      if (!outcome.recorded && onGiveUp !== undefined) {
        try {
          await onGiveUp(outcome);
        } catch {
          // Reporting the give-up failed too; the claim still reads in doubt, which is the truth.
        }
      }
      return outcome;
    } finally {
      this.#pending.delete(id);
    }
  }

  /**
   * Attempts 2..ATTEMPTS, after the first failed with `first`. A store that refuses the answer
   * itself (`invalid_input`: not JSON, or over the answer limit) is sent the receipt alone at
   * once: the call's outcome is kept without the reply a duplicate would have read back, rather
   * than lost with it and the call left in doubt.
   */
  async #attempts(settle: Settle, first: unknown): Promise<SettleOutcome> {
    let code = codeOf(first);
    let current = settle;
    for (let attempt = 1; ; attempt++) {
      if (FINAL_CODES.has(code) && current.answer !== undefined) {
        current = Object.assign({}, current, { answer: undefined });
      } else if (FINAL_CODES.has(code) || attempt === ATTEMPTS) {
        return { recorded: false, attempts: attempt, code };
      } else {
        // Not unref'd: a host awaiting drain() before exit must not exit with a retry pending.
        await new Promise((resolve) => setTimeout(resolve, RETRY_PAUSES_MS[attempt - 1]));
      }
      try {
        await this.#send(current);
        return RECORDED;
      } catch (error) {
        code = codeOf(error);
      }
    }
  }
}

/** One settle: the receipt, and the answer when the gate keeps one. */
interface Settle {
  readonly key: ClaimKey;
  readonly receipt: ClaimReceipt;
  readonly answer: JsonValue | undefined;
}

const RECORDED: SettleOutcome = Object.freeze({ recorded: true });

function codeOf(error: unknown): string {
  return isTesseraError(error) ? error.code : "error";
}
