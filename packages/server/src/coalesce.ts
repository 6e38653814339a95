import type { ServiceStores } from "./service.js";

/** The store calls that write: the ones a commit (and its fsync or round trip) is paid for. */
const WRITES: Readonly<Record<keyof ServiceStores, ReadonlySet<string>>> = {
  grants: new Set(),
  usage: new Set(["tryConsume", "tryConsumeMany"]),
  audit: new Set(["append"]),
  claims: new Set(["claim", "settle"]),
};

/**
 * Lines up the store writes of concurrent requests so they leave together. The stores share
 * a commit among the writes issued in one tick (SQLite's group commit, PostgreSQL's batcher),
 * but each HTTP request runs in its own I/O callback, and the microtasks of one callback drain
 * before the next starts: without this, the claim of every request of a burst would be issued
 * and committed on its own, one fsync or round trip each.
 *
 * When requests come in bursts (more than one started in this turn of the event loop, or in
 * the last turn that had any) or a write is still in flight, a new write is queued, and
 * everything queued is issued from one callback in the check phase, after the poll phase has
 * run every request whose bytes arrived. (Neither in-flight writes nor requests in progress
 * can tell alone: a synchronous driver's write, and the whole request around it, are over
 * before the next request's callback runs.) A request served alone has its writes issued at
 * once, so c=1 pays no extra turn. Only the moment a write is issued changes: each is still awaited by its own
 * caller before that caller goes on, so every durability and ordering rule of a request holds.
 */
export class WriteRounds {
  #queue: (() => void)[] = [];
  #scheduled = false;
  #inFlight = 0;
  /** Requests started in this turn of the event loop so far. */
  #started = 0;
  /** More than one request started in the last turn that had any: the requests come in bursts. */
  #bursts = false;
  #watching = false;
  /**
   * The store answered the last probed write within the turn it was issued in: a synchronous
   * driver (SQLite), whose requests never overlap on their own. A store that answers in a
   * later turn (PostgreSQL, Redis) overlaps requests by itself and batches what overlaps, so
   * its writes are issued at once: holding them for a round only delayed them (measured).
   */
  #answersInTurn = true;
  #probing = false;
  readonly #turnEnded = () => {
    this.#bursts = this.#started > 1;
    this.#started = 0;
    this.#watching = false;
  };
  readonly #flush = () => {
    const queue = this.#queue;
    this.#queue = [];
    this.#scheduled = false;
    for (const start of queue) start();
  };
  readonly #done = () => {
    this.#inFlight--;
  };

  /** A request started: counted for this turn, which ends in the check phase. */
  enter(): void {
    this.#started++;
    if (this.#watching) return;
    this.#watching = true;
    setImmediate(this.#turnEnded);
  }

  /** Issues `write` now or with the next round; a port that answers synchronously still may now. */
  issue<T>(write: () => T | Promise<T>): T | Promise<T> {
    const alone = this.#started <= 1 && !this.#bursts && this.#inFlight === 0;
    if ((alone || !this.#answersInTurn) && !this.#scheduled) return this.#start(write);
    return new Promise<T>((resolve, reject) => {
      this.#queue.push(() => {
        try {
          Promise.resolve(this.#start(write)).then(resolve, reject);
        } catch (error) {
          reject(error);
        }
      });
      if (this.#scheduled) return;
      this.#scheduled = true;
      setImmediate(this.#flush);
    });
  }

  /** Throws as `write` throws: a port's synchronous refusal stays synchronous. */
  #start<T>(write: () => T | Promise<T>): T | Promise<T> {
    const written = write();
    if (written instanceof Promise) {
      this.#inFlight++;
      written.then(this.#done, this.#done);
      if (!this.#probing) this.#probe(written);
    }
    return written;
  }

  /** Did the store answer this write before the turn's check phase (a synchronous driver)? */
  #probe(written: Promise<unknown>): void {
    this.#probing = true;
    let answered = false;
    const answer = () => {
      answered = true;
    };
    written.then(answer, answer);
    setImmediate(() => {
      this.#answersInTurn = answered;
      this.#probing = false;
    });
  }

  /** The stores with their writes issued through these rounds; reads pass straight through. */
  stores(stores: ServiceStores): ServiceStores {
    return {
      grants: stores.grants,
      usage: this.#port(stores.usage, WRITES.usage),
      audit: this.#port(stores.audit, WRITES.audit),
      claims: this.#port(stores.claims, WRITES.claims),
    };
  }

  #port<T extends object>(target: T, writes: ReadonlySet<string>): T {
    const wrapped = new Map<string, unknown>();
    const rounds = this;
    return new Proxy(target, {
      get(object, property) {
        const value = Reflect.get(object, property, object);
        if (typeof value !== "function" || typeof property !== "string") return value;
        let method = wrapped.get(property);
        if (method === undefined) {
          // Called on the store itself, never the proxy: its private fields need the real `this`.
          method = writes.has(property)
            ? (...args: unknown[]) => rounds.issue(() => value.apply(object, args))
            : value.bind(object);
          wrapped.set(property, method);
        }
        return method;
      },
    });
  }
}
