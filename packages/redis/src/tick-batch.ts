/**
 * Gathers the requests made while one tick runs and hands them over together once it ends
 * (`process.nextTick` from the first): every continuation resumed in the current microtask
 * drain still joins, and nothing waits past the tick that issued it. Groups are at most
 * `limit` long, so one script never holds the server for long.
 */
export class TickBatch<Item> {
  readonly #limit: number;
  readonly #send: (batch: readonly Item[]) => void;
  #pending: Item[] = [];

  constructor(limit: number, send: (batch: readonly Item[]) => void) {
    this.#limit = limit;
    this.#send = send;
  }

  add(item: Item): void {
    if (this.#pending.push(item) === 1) process.nextTick(this.#flush);
  }

  /** Sends what is gathered now (before closing: it was issued while the store was open). */
  flush(): void {
    this.#flush();
  }

  readonly #flush = (): void => {
    const all = this.#pending;
    if (all.length === 0) return;
    this.#pending = [];
    if (all.length <= this.#limit) {
      this.#send(all);
      return;
    }
    for (let start = 0; start < all.length; start += this.#limit) {
      this.#send(all.slice(start, start + this.#limit));
    }
  };
}

/** A caller waiting for its own answer out of a batch. */
export interface Waiting<Result> {
  readonly resolve: (result: Result) => void;
  readonly reject: (error: unknown) => void;
}
