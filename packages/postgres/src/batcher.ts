/** One caller's answer from a batch: its own value, or its own error. */
export type Outcome<Out> =
  | { readonly ok: true; readonly value: Out }
  | { readonly ok: false; readonly error: unknown };

/**
 * Sends every request that arrives while earlier batches are in flight as the next batch.
 * A request that finds fewer than `maxInFlight` batches out goes after the current
 * microtasks (so requests issued in the same tick travel together); otherwise it waits for
 * a batch to come back and leaves with everything queued behind it. At one request
 * in flight this is one statement per request, as before; at 64 it is one statement for
 * many, and the round trip and the commit are shared.
 *
 * `send` answers each request of a batch in order (one outcome each); if it throws, every
 * caller of the batch gets that error (a lost connection fails them all closed).
 */
export class Batcher<In, Out> {
  readonly #send: (batch: readonly In[]) => Promise<readonly Outcome<Out>[]>;
  readonly #maxInFlight: number;
  readonly #maxBatch: number;
  #queue: { item: In; resolve: (value: Out) => void; reject: (error: unknown) => void }[] = [];
  #inFlight = 0;
  #scheduled = false;

  constructor(
    send: (batch: readonly In[]) => Promise<readonly Outcome<Out>[]>,
    maxInFlight = 2,
    maxBatch = 512,
  ) {
    this.#send = send;
    this.#maxInFlight = maxInFlight;
    this.#maxBatch = maxBatch;
  }

  submit(item: In): Promise<Out> {
    return new Promise<Out>((resolve, reject) => {
      this.#queue.push({ item, resolve, reject });
      this.#schedule();
    });
  }

  #schedule(): void {
    if (this.#scheduled || this.#inFlight >= this.#maxInFlight || this.#queue.length === 0) return;
    this.#scheduled = true;
    queueMicrotask(() => {
      this.#scheduled = false;
      void this.#flush();
    });
  }

  async #flush(): Promise<void> {
    if (this.#inFlight >= this.#maxInFlight || this.#queue.length === 0) return;
    const batch = this.#queue.splice(0, this.#maxBatch);
    this.#inFlight++;
    try {
      const outcomes = await this.#send(batch.map((pending) => pending.item));
      batch.forEach((pending, i) => {
        const outcome = outcomes[i];
        if (!outcome) pending.reject(new Error("batch answered fewer requests than it was sent"));
        else if (outcome.ok) pending.resolve(outcome.value);
        else pending.reject(outcome.error);
      });
    } catch (error) {
      for (const pending of batch) pending.reject(error);
    } finally {
      // The slot frees only after the callers just answered have run on and issued their
      // next requests (setImmediate follows the microtasks they run in), so those leave as
      // one batch with everything queued meanwhile, not one by one.
      setImmediate(() => {
        this.#inFlight--;
        this.#schedule();
      });
    }
  }
}

/** Groups indexes of `items` by `keyOf`, each group in arrival order, groups by first arrival. */
export function groupBy<T>(items: readonly T[], keyOf: (item: T) => string): Map<string, number[]> {
  const groups = new Map<string, number[]>();
  items.forEach((item, i) => {
    const key = keyOf(item);
    const group = groups.get(key);
    if (group) group.push(i);
    else groups.set(key, [i]);
  });
  return groups;
}

/**
 * Sends again a statement that PostgreSQL aborted as a deadlock (40P01): it was rolled back
 * whole, so resending cannot apply anything twice. Batches take their row locks in key order,
 * but the join order of an `UPDATE … FROM` is the planner's, so two batches may still cross.
 */
export async function retryDeadlock<T>(send: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await send();
    } catch (error) {
      const cause = (error as { cause?: { code?: unknown } })?.cause;
      if (attempt >= 3 || cause?.code !== "40P01") throw error;
    }
  }
}
