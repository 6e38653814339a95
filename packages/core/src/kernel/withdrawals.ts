import type { JsonValue } from "../contracts/claims.js";
import { isTesseraError } from "../contracts/errors.js";
import type { ActLedger, DeniedAnswer, Withdrawal, WithdrawResult } from "../ports/act-ledger.js";

/** What a withdrawn act's claim answers to every retry of its call ID: a denial. */
export const WITHDRAWN_ANSWER: DeniedAnswer & JsonValue = Object.freeze({
  status: "denied",
  code: "authority_unavailable",
});

/** The first pause before an attempt, and the longest pause between two (doubling). */
const FIRST_PAUSE_MS = 50;
const MAX_PAUSE_MS = 2_000;
/**
 * Withdrawals held at most. During an outage every act with a claim that fails is scheduled
 * (most will find nothing: `not_recorded`); past this many the newest are not, and such a call
 * stays in doubt if its act did land, as it did before withdrawals. Bounds memory and the
 * burst of withdrawals sent when the store is back.
 */
const MAX_PENDING = 4_096;

export interface WithdrawalTiming {
  readonly firstPauseMs?: number;
  readonly maxPauseMs?: number;
}

interface Pending {
  readonly withdrawal: Withdrawal;
  readonly done: ((result: WithdrawResult) => void) | undefined;
  /** Cuts the current pause short (set while the withdrawal waits between attempts). */
  wake: (() => void) | undefined;
  /** Called after the next attempt ends, whatever it gave (`drain` waits on them). */
  readonly attempted: (() => void)[];
}

/**
 * Withdrawals of acts whose `record` threw, run in the background until the ledger answers.
 *
 * When a store's reply is lost, the act may have landed (its claim unsettled, its use spent,
 * its allowed event written) although the caller heard `*_unavailable` and nothing ran. Left
 * so, the claim blocks its call ID forever (every retry finds it in doubt). Each act with a
 * claim whose record threw is withdrawn here (`ActLedger.withdraw`): tried first after a short
 * pause (a record the store is still committing has then either landed or failed), then again
 * with a doubling pause (50 ms to 2 s) while the store cannot tell, until it gives a result or
 * `close` is called. Timers are unreferenced: a host exiting is not held up by a store that
 * stays down; what was not withdrawn by then stays in doubt, as it did before (listInDoubt).
 *
 * An error other than `*_unavailable` (`invalid_input`: an act the ledger refuses) ends the
 * withdrawal: trying again cannot change it. One per kernel, shared by its turns.
 */
export class Withdrawals {
  readonly #acts: ActLedger;
  readonly #firstPauseMs: number;
  readonly #maxPauseMs: number;
  readonly #pending = new Set<Pending>();
  #closed = false;

  constructor(acts: ActLedger, timing: WithdrawalTiming = {}) {
    this.#acts = acts;
    this.#firstPauseMs = timing.firstPauseMs ?? FIRST_PAUSE_MS;
    this.#maxPauseMs = timing.maxPauseMs ?? MAX_PAUSE_MS;
  }

  /** Withdrawals not yet answered by the ledger. */
  get size(): number {
    return this.#pending.size;
  }

  /**
   * Starts withdrawing `withdrawal` in the background; `done` hears the ledger's result (not
   * called when the withdrawal ends without one: closed, or refused). False, and nothing
   * scheduled, when the ledger has no `withdraw`, this was closed, or it holds `MAX_PENDING`.
   */
  schedule(withdrawal: Withdrawal, done?: (result: WithdrawResult) => void): boolean {
    if (this.#closed || typeof this.#acts.withdraw !== "function") return false;
    if (this.#pending.size >= MAX_PENDING) return false;
    const pending: Pending = { withdrawal, done, wake: undefined, attempted: [] };
    this.#pending.add(pending);
    void this.#run(pending);
    return true;
  }

  /**
   * Tries every pending withdrawal once more, now (their pauses cut short), and waits for
   * those attempts (or the one already in flight): it returns once each has ended one attempt,
   * landed or not.
   * So it never hangs while a store stays down (it waits one store round trip); withdrawals
   * still failing stay scheduled and keep trying.
   */
  async drain(): Promise<void> {
    const rounds: Promise<void>[] = [];
    for (const pending of this.#pending) {
      rounds.push(new Promise<void>((resolve) => pending.attempted.push(resolve)));
      pending.wake?.();
    }
    await Promise.all(rounds);
  }

  /** Stops trying: pending withdrawals end after their attempt in flight, if any. */
  close(): void {
    this.#closed = true;
    for (const pending of this.#pending) pending.wake?.();
  }

  async #run(pending: Pending): Promise<void> {
    const withdraw = this.#acts.withdraw as NonNullable<ActLedger["withdraw"]>;
    let pause = this.#firstPauseMs;
    try {
      for (;;) {
        await this.#pause(pending, pause);
        if (this.#closed) return;
        let result: WithdrawResult | undefined;
        try {
          result = await withdraw.call(this.#acts, pending.withdrawal);
        } catch (error) {
          if (isTesseraError(error) && !error.code.endsWith("_unavailable")) return;
        }
        if (result !== undefined) {
          try {
            pending.done?.(result);
          } catch {
            // The listener's failure is its own; the withdrawal stands.
          }
          return;
        }
        ended(pending);
        pause = Math.min(pause * 2, this.#maxPauseMs);
      }
    } finally {
      this.#pending.delete(pending);
      ended(pending);
    }
  }

  #pause(pending: Pending, ms: number): Promise<void> {
    if (this.#closed) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const timer = setTimeout(wake, ms);
      timer.unref?.();
      function wake(): void {
        clearTimeout(timer);
        pending.wake = undefined;
        resolve();
      }
      pending.wake = wake;
    });
  }
}

/** Tells whoever drains that this withdrawal's attempt ended. */
function ended(pending: Pending): void {
  for (const resolve of pending.attempted.splice(0)) resolve();
}
