import { isTesseraError, TesseraError } from "@tessera/core";
import { type UnavailableCode, unavailable } from "./unavailable.js";

const MAX_BATCH = 512;
/** Deferred fsyncs in a row that no other batch overlapped before callers count as alone. */
const LONELY_AFTER = 3;
/** While callers are alone, one flushed batch in this many still defers, to notice company. */
const PROBE_EVERY = 16;

interface Pending {
  readonly code: UnavailableCode;
  readonly work: () => unknown;
  /** False for a receipt: its commit may ride on the next flushed one (see `submit`). */
  readonly flush: boolean;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
}

/** What one write of a batch came to, held until the batch's COMMIT has returned. */
type Outcome =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly error: unknown };

/**
 * Group commit for one better-sqlite3 connection. The driver is synchronous, so inside one
 * process nothing can arrive while a write is in progress: what can be shared is the commit
 * (the fsync at `synchronous=FULL`) of the writes issued together. Every write a store
 * issues is queued here; the first one schedules a flush, and the flush runs every queued
 * write, in arrival order, inside one `BEGIN IMMEDIATE … COMMIT`. (After a batch of one,
 * the next write runs at once instead: see `submit`.)
 *
 * Exactness comes from running the writes one after another under the write lock, exactly
 * as separate transactions in the same order would: the second claim of a key sees the
 * first one's row, a consume sees the counts spent before it. No caller hears its answer
 * before COMMIT returned, so an answer is never ahead of the disk.
 *
 * A write that refuses on its own terms (a `TesseraError` other than `*_unavailable`, such as
 * settling an unknown key) has written nothing; it is answered with its error and the rest
 * of the batch stands. Anything else (SQLITE_FULL, SQLITE_BUSY past the busy timeout, I/O
 * error, a closed connection, a moved file) rolls the whole batch back, and every caller in
 * it gets its own port's `*_unavailable`: no caller is told of a write that did not land.
 *
 * A batch made only of writes submitted with `flush = false` (claim receipts) commits
 * through `unflushed`, which skips the commit's fsync: in WAL its frames reach the disk with
 * the next flushed commit, and a receipt lost meanwhile reads `in_doubt`, which is the truth.
 * One write needing the flush makes the whole batch flushed.
 */
export class GroupCommit {
  readonly #alone: (work: () => unknown) => unknown;
  readonly #transaction: (work: () => void) => void;
  readonly #unflushed: ((commit: () => unknown) => unknown) | undefined;
  /** Waits until what was committed unflushed is on disk (the WAL fsynced off the loop). */
  readonly #durable: (() => Promise<void>) | undefined;
  /**
   * Batches committed and waiting for their fsync. While any waits, no write runs alone: one
   * that did would answer at once, its caller's next write would run alone again, and that
   * chain of microtasks would keep the event loop (and the fsync's callback) from turning.
   */
  #waiting = 0;
  /** A batch committed while another waited for its fsync: deferring is being shared. */
  #overlapped = false;
  /** Deferred fsyncs in a row that nothing overlapped (see `#defers`). */
  #lonely = 0;
  /** Flushed batches committed on the spot since the last probe. */
  #sinceProbe = 0;
  #queue: Pending[] = [];
  #scheduled = false;
  /** One bound function for every flush: no closure per write. */
  readonly #flushNow = () => this.#flush();
  /** The last batch was a single write: the next write alone may run at once. */
  #solo = true;
  /** A write ran at once in the current tick: the ones after it in this tick are queued. */
  #tickOpen = false;
  readonly #closeTick = () => {
    this.#tickOpen = false;
  };

  /**
   * `alone` runs a batch of one as it is (its statement commits on its own); `transaction`
   * runs its argument inside BEGIN IMMEDIATE … COMMIT. Either throws on failure.
   * `unflushed`, when given, runs a commit (one of the two) without its own fsync; without
   * it every batch is flushed as configured. `durable`, given with it, resolves once every
   * commit made so far is on disk: then a batch that needs its flush commits unflushed too
   * and its callers are answered after `durable`, so the fsync runs on the thread pool (one
   * for every batch committed meanwhile) instead of inside COMMIT, blocking the event loop.
   */
  constructor(
    alone: (work: () => unknown) => unknown,
    transaction: (work: () => void) => void,
    unflushed?: (commit: () => unknown) => unknown,
    durable?: () => Promise<void>,
  ) {
    this.#alone = alone;
    this.#transaction = transaction;
    this.#unflushed = unflushed;
    this.#durable = unflushed === undefined ? undefined : durable;
  }

  /**
   * Queues `work` (synchronous SQL) and resolves with its result once committed. With
   * `flush = false` the commit may skip its fsync when nothing else in its batch needs one.
   */
  submit<T>(code: UnavailableCode, work: () => T, flush = true): Promise<T> {
    if (this.#solo && !this.#scheduled && !this.#tickOpen && this.#waiting === 0) {
      // Nothing queued, and the last batch was one write: most likely a caller alone (c=1).
      // It runs now, as its own autocommit statement, and is answered once that returned
      // (the queue's promise and microtask cost about 7% of a c=1 consume at NORMAL). A
      // write that follows in the same tick is queued behind it and batched as usual, and
      // from then on, while batches hold more than one write, every write is queued.
      // A caller alone gains nothing from an fsync off the loop (nobody else is waiting to
      // run) and would pay the thread pool's round trip: its commit fsyncs as configured.
      this.#tickOpen = true;
      queueMicrotask(this.#closeTick);
      try {
        const unflushed = flush ? undefined : this.#unflushed;
        const value = unflushed ? unflushed(() => this.#alone(work)) : this.#alone(work);
        return Promise.resolve(value as T);
      } catch (error) {
        return Promise.reject(ownOrRecoded(code, error));
      }
    }
    return this.enqueue(code, work, flush);
  }

  /**
   * `submit` without the idle shortcut: always queued, so every write issued in this tick
   * lands in one batch, the first included. An act takes this way: 50 acts started together
   * cost one commit, not the first one's plus the batch's (one microtask more for an act
   * alone, which commits once either way).
   */
  enqueue<T>(code: UnavailableCode, work: () => T, flush = true): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#queue.push({ code, work, flush, resolve: resolve as (value: unknown) => void, reject });
      if (this.#scheduled) return;
      this.#scheduled = true;
      // A microtask, not setImmediate: a caller alone waits for no turn of the event loop,
      // and callers issuing together in one tick still land in the same batch.
      queueMicrotask(this.#flushNow);
    });
  }

  #flush(): void {
    // Bounded, so one batch holds the file's write lock for a few milliseconds at most and
    // other processes waiting on it stay well inside their busy timeout.
    if (this.#waiting > 0) this.#overlapped = true;
    let batch = this.#queue;
    if (batch.length > MAX_BATCH) {
      batch = batch.splice(0, MAX_BATCH);
      queueMicrotask(this.#flushNow);
    } else {
      this.#queue = [];
      this.#scheduled = false;
    }
    this.#solo = batch.length === 1;
    if (batch.length === 1) {
      this.#flushOne(batch[0] as Pending);
      return;
    }
    const outcomes: Outcome[] = [];
    const needs = batch.some(needsFlush);
    const durable = needs && this.#defers() ? this.#durable : undefined;
    const unflushed = durable !== undefined || !needs ? this.#unflushed : undefined;
    const commit = () =>
      this.#transaction(() => {
        outcomes.length = 0;
        for (const pending of batch) outcomes.push(runOne(pending));
      });
    try {
      if (unflushed) unflushed(commit);
      else commit();
    } catch (error) {
      for (const pending of batch) pending.reject(recode(pending.code, error));
      return;
    }
    const answer = () =>
      batch.forEach((pending, i) => {
        const outcome = outcomes[i] as Outcome;
        if (outcome.ok) pending.resolve(outcome.value);
        else pending.reject(outcome.error);
      });
    if (durable === undefined) {
      answer();
      return;
    }
    this.#onDisk(durable, answer, (error) => {
      for (const pending of batch) pending.reject(recode(pending.code, error));
    });
  }

  /**
   * Whether a batch that needs its flush defers the fsync to the thread pool, or commits at
   * FULL on the spot. Deferring pays when other callers have work to run meanwhile (their
   * batches commit during the fsync and share the next one); a caller alone (c=1) has none,
   * and would only pay the thread pool's round trip. Nothing in one process tells the two
   * apart in advance (HTTP requests arrive one tick each either way), so it is learnt: after
   * `LONELY_AFTER` deferred fsyncs in a row that no other batch overlapped, batches commit on
   * the spot, and one in `PROBE_EVERY` still defers, so a burst is noticed within that many.
   * Either way no caller hears of its write before it is on disk.
   */
  #defers(): boolean {
    if (this.#durable === undefined) return false;
    if (this.#waiting > 0 || this.#lonely < LONELY_AFTER) return true;
    if (++this.#sinceProbe < PROBE_EVERY) return false;
    this.#sinceProbe = 0;
    return true;
  }

  /** Committed, not yet on disk: nobody hears of it until it is (or that it cannot be). */
  #onDisk(durable: () => Promise<void>, answer: () => void, fail: (error: unknown) => void): void {
    this.#waiting++;
    durable().then(
      () => {
        this.#settled();
        answer();
      },
      (error: unknown) => {
        this.#settled();
        fail(error);
      },
    );
  }

  /** An fsync returned: when the last one did, whether anything overlapped the wait. */
  #settled(): void {
    this.#waiting--;
    if (this.#waiting > 0) return;
    this.#lonely = this.#overlapped ? 0 : this.#lonely + 1;
    this.#overlapped = false;
  }

  /** A write alone: its own statement's commit is the batch's, as before batching. */
  #flushOne(pending: Pending): void {
    let value: unknown;
    const durable = pending.flush && this.#defers() ? this.#durable : undefined;
    const unflushed = pending.flush && durable === undefined ? undefined : this.#unflushed;
    try {
      value = unflushed ? unflushed(() => this.#alone(pending.work)) : this.#alone(pending.work);
    } catch (error) {
      pending.reject(ownOrRecoded(pending.code, error));
      return;
    }
    if (durable === undefined) {
      pending.resolve(value);
      return;
    }
    this.#onDisk(
      durable,
      () => pending.resolve(value),
      (error) => pending.reject(recode(pending.code, error)),
    );
  }
}

function needsFlush(pending: Pending): boolean {
  return pending.flush;
}

/** Runs one write; a refusal of its own is kept, any other failure aborts the batch. */
function runOne(pending: Pending): Outcome {
  try {
    return { ok: true, value: pending.work() };
  } catch (error) {
    if (isTesseraError(error) && !error.code.endsWith("_unavailable")) return { ok: false, error };
    throw error;
  }
}

/** A write alone failed: a refusal of its own stands, anything else is the port's outage. */
function ownOrRecoded(code: UnavailableCode, error: unknown): unknown {
  const own = isTesseraError(error) && !error.code.endsWith("_unavailable");
  return own ? error : recode(code, error);
}

/** The batch failed: each caller hears it under its own port's code. */
function recode(code: UnavailableCode, error: unknown): Error {
  if (isTesseraError(error)) {
    return error.code === code ? error : new TesseraError(code, error.message, { cause: error });
  }
  return unavailable(code, error);
}
