import { type ClaimKey, type ClaimReceipt, type ClaimStore, isTesseraError } from "@tessera/core";

/**
 * When the gate writes a call's receipt (its settle):
 * - `"after-reply"` (default): the reply goes back as soon as the outcome is known and the
 *   receipt is written beside it. The claim is the only write that must be durable before the
 *   callback runs; the receipt only records what already happened. If the process dies before
 *   the receipt lands, the claim reads `in_doubt`, which is the truth: the call may have run.
 *   A call then costs one durable write on its critical path instead of two, and the settles
 *   of every call in flight reach the store together, where a group commit can batch them.
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
 * The gate's receipt writer: every settle it starts is tracked until it ends, retried a
 * bounded number of times, and never rejects (a settle nobody awaits must not become an
 * unhandled rejection). `drain()` waits for every settle started before it was called.
 */
export class SettleQueue {
  readonly #claims: ClaimStore;
  readonly #pending = new Set<Promise<void>>();

  constructor(claims: ClaimStore) {
    this.#claims = claims;
  }

  /**
   * Starts writing `receipt` now, so the settles of concurrent calls are in flight together.
   * `onGiveUp` runs (and is tracked, and may not throw into nothing) when the receipt could
   * not be written; the returned promise resolves once the settle has ended either way.
   */
  write(
    key: ClaimKey,
    receipt: ClaimReceipt,
    onGiveUp?: (outcome: SettleOutcome & { recorded: false }) => Promise<void>,
  ): Promise<SettleOutcome> {
    const outcome = this.#attempt(key, receipt);
    const tracked = outcome.then(async (ended) => {
      if (ended.recorded || onGiveUp === undefined) return;
      try {
        await onGiveUp(ended);
      } catch {
        // Reporting the give-up failed too; the claim still reads in doubt, which is the truth.
      }
    });
    this.#pending.add(tracked);
    void tracked.finally(() => this.#pending.delete(tracked));
    return outcome;
  }

  /** How many settles have not ended yet. */
  get size(): number {
    return this.#pending.size;
  }

  /** Resolves once every settle started before this call has ended. Never rejects. */
  async drain(): Promise<void> {
    await Promise.all([...this.#pending]);
  }

  async #attempt(key: ClaimKey, receipt: ClaimReceipt): Promise<SettleOutcome> {
    let code = "error";
    for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
      try {
        await this.#claims.settle(key, receipt);
        return { recorded: true };
      } catch (error) {
        code = isTesseraError(error) ? error.code : "error";
        if (FINAL_CODES.has(code) || attempt === ATTEMPTS) {
          return { recorded: false, attempts: attempt, code };
        }
      }
      // Not unref'd: a host awaiting drain() before exit must not exit with a retry pending.
      await new Promise((resolve) => setTimeout(resolve, RETRY_PAUSES_MS[attempt - 1]));
    }
    return { recorded: false, attempts: ATTEMPTS, code };
  }
}
