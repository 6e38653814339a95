/**
 * Group commit of one fsync: every caller is released by an fsync that *started after* it
 * asked, and callers that ask while an fsync runs share the next one. With k claims in flight
 * that is about one directory fsync per round instead of k.
 */
export class GroupSync {
  readonly #sync: () => Promise<void>;
  #running = false;
  #waiting:
    | { promise: Promise<void>; resolve: () => void; reject: (e: unknown) => void }
    | undefined;

  constructor(sync: () => Promise<void>) {
    this.#sync = sync;
  }

  request(): Promise<void> {
    if (this.#waiting) return this.#waiting.promise;
    let resolve!: () => void;
    let reject!: (e: unknown) => void;
    const promise = new Promise<void>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    this.#waiting = { promise, resolve, reject };
    if (!this.#running) this.#start();
    return promise;
  }

  #start(): void {
    const batch = this.#waiting;
    if (!batch) return;
    this.#waiting = undefined;
    this.#running = true;
    this.#sync().then(
      () => this.#next(batch.resolve),
      (error: unknown) => this.#next(() => batch.reject(error)),
    );
  }

  #next(release: () => void): void {
    this.#running = false;
    release();
    this.#start();
  }
}
