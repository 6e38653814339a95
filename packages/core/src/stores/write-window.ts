/**
 * Writes made after their reply (receipts, kept answers) wait here for others to join them:
 * up to `ms` after the first one, or until `max` wait. The window then closes and all of them
 * start in one tick, so the store shares one commit among them (SQLite's group commit,
 * PostgreSQL's and Redis's batches) even when calls come one at a time, instead of each
 * taking a commit of its own that the next call's claim queues behind. A process that dies
 * inside the window leaves those writes undone: their calls read in doubt, as they would had
 * it died before writing.
 */
export class WriteWindow {
  readonly #ms: number;
  readonly #max: number;
  /** The current window: one promise its writes all wait on, opened by the first of them. */
  #closed: Promise<void> | undefined;
  #close: () => void = () => undefined;
  #waiting = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;

  constructor(ms: number, max: number) {
    this.#ms = ms;
    this.#max = max;
  }

  /** Resolves when the current window closes. */
  join(): Promise<void> {
    if (this.#closed === undefined) {
      this.#closed = new Promise<void>((resolve) => {
        this.#close = resolve;
      });
      // Not unref'd: a write waiting in the window keeps the process up until it starts.
      this.#timer = setTimeout(() => this.release(), this.#ms);
    }
    const closed = this.#closed;
    if (++this.#waiting >= this.#max) this.release();
    return closed;
  }

  /** Closes the current window now (a drain, or someone waiting on one of its writes). */
  release(): void {
    if (this.#closed === undefined) return;
    clearTimeout(this.#timer);
    this.#close();
    this.#closed = undefined;
    this.#timer = undefined;
    this.#waiting = 0;
  }
}
