import { performance } from "node:perf_hooks";
import type { ServiceStores } from "./stores.js";

/** A write call that held the thread this long, answered within its turn, committed in it. */
const BLOCKING_MS = 0.05;

/** The store calls that write: the ones a commit (and its fsync or round trip) is paid for. */
const WRITES: Readonly<Record<keyof Required<ServiceStores>, ReadonlySet<string>>> = {
  grants: new Set(),
  usage: new Set(["tryConsume", "tryConsumeMany"]),
  audit: new Set(["append"]),
  claims: new Set(["claim", "settle"]),
  acts: new Set(["record"]),
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
 * once, so c=1 pays no extra turn, and so are the writes of a store that does not block (see
 * `#blocking`). Only the moment a write is issued changes: each is still awaited by its own
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
   * The probed writes block (see `#learn`): a call held the thread at least `BLOCKING_MS` and
   * was answered within its turn — a synchronous driver committing (SQLite), whose requests
   * never overlap on their own. Only then are writes held for a round. A store that answers in a later turn
   * (PostgreSQL, Redis) overlaps requests by itself and batches what overlaps, and one that
   * answers at once (memory) has no commit to share: holding their writes for a round only
   * delayed them (measured, same-run A/B: about 0.65x and 0.74x at c=10).
   */
  #blocking = false;
  #score = 0;
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

  /**
   * A request started: counted for this turn, which ends in the check phase. Only while the
   * store blocks: otherwise nothing is held, and a pending immediate per turn makes the loop
   * poll without waiting, in smaller bites (memory stores served about 0.65x at c=10).
   */
  enter(): void {
    if (!this.#blocking) return;
    this.#started++;
    if (this.#watching) return;
    this.#watching = true;
    setImmediate(this.#turnEnded);
  }

  /** Issues `write` now or with the next round; a port that answers synchronously still may now. */
  issue<T>(write: () => T | Promise<T>): T | Promise<T> {
    const alone = this.#started <= 1 && !this.#bursts && this.#inFlight === 0;
    if ((alone || !this.#blocking) && !this.#scheduled) return this.#start(write, !this.#probing);
    return new Promise<T>((resolve, reject) => {
      this.#queue.push(() => {
        try {
          Promise.resolve(this.#start(write, false)).then(resolve, reject);
        } catch (error) {
          reject(error);
        }
      });
      if (this.#scheduled) return;
      this.#scheduled = true;
      setImmediate(this.#flush);
    });
  }

  /**
   * Throws as `write` throws: a port's synchronous refusal stays synchronous. `probe` only for
   * a write issued alone: inside a round a group commit queues it, and the call is quick.
   */
  #start<T>(write: () => T | Promise<T>, probe: boolean): T | Promise<T> {
    const begun = probe ? performance.now() : 0;
    const written = write();
    const held = probe ? performance.now() - begun : 0;
    if (written instanceof Promise) {
      this.#inFlight++;
      written.then(this.#done, this.#done);
      if (probe) this.#probe(written, held);
    } else if (probe) {
      this.#learn(held >= BLOCKING_MS);
    }
    return written;
  }

  /**
   * The call held the thread `held` ms; did the store also answer before the turn's check
   * phase? Timed on the call alone, not up to the answer: in a busy process the microtasks
   * ahead of the answer would make a store in memory look like one that commits.
   */
  #probe(written: Promise<unknown>, held: number): void {
    this.#probing = true;
    let answered = false;
    const answer = () => {
      answered = true;
    };
    written.then(answer, answer);
    setImmediate(() => {
      this.#learn(answered && held >= BLOCKING_MS);
      this.#probing = false;
    });
  }

  /**
   * One probe moves a score by one, and the store counts as blocking from 2 of 4: a quick
   * commit among slow ones (SQLite's settles skip their fsync) or a garbage-collection pause
   * inside a store in memory does not flip the mode on its own.
   */
  #learn(blocked: boolean): void {
    this.#score = blocked ? Math.min(this.#score + 1, 4) : Math.max(this.#score - 1, 0);
    this.#blocking = this.#score >= 2;
  }

  /** The stores with their writes issued through these rounds; reads pass straight through. */
  stores(stores: ServiceStores): ServiceStores {
    return {
      grants: stores.grants,
      usage: this.#port(stores.usage, WRITES.usage),
      audit: this.#port(stores.audit, WRITES.audit),
      claims: this.#port(stores.claims, WRITES.claims),
      ...(stores.acts === undefined ? {} : { acts: this.#port(stores.acts, WRITES.acts) }),
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
