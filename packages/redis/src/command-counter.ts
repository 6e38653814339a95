/**
 * Commands the driver sent on one connection, by name (lower case): every command and every
 * script leaves through ioredis's `sendCommand`, which `Connection` wraps, so this is the
 * exact number of round trips the stores made (pipelined or not). Tests and the benchmark
 * read it; it costs a map update per command.
 */
export class CommandCounter {
  readonly #byName = new Map<string, number>();
  #total = 0;

  count(name: string): void {
    this.#total++;
    this.#byName.set(name, (this.#byName.get(name) ?? 0) + 1);
  }

  get total(): number {
    return this.#total;
  }

  /** Commands of one name (`evalsha`, `eval`, `set`…) sent since the last reset. */
  of(name: string): number {
    return this.#byName.get(name) ?? 0;
  }

  /** Every name counted since the last reset, for a test's failure message. */
  snapshot(): Record<string, number> {
    return Object.fromEntries(this.#byName);
  }

  reset(): void {
    this.#total = 0;
    this.#byName.clear();
  }
}
