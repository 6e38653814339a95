import { auditHolds } from "../audit/holds.js";
import { TesseraError } from "../contracts/errors.js";
import type { AuditEvent } from "../contracts/schemas.js";
import type { AppendOptions, AuditSink } from "../ports/audit-sink.js";
import { WriteWindow } from "../stores/write-window.js";

/** How long a denial's event waits for others to share its write, and how many may wait. */
const WINDOW_MS = 10;
const MAX_WAITING = 256;
/** An event answered already, which changes nothing: see `AppendOptions`. */
const AFTER_REPLY: AppendOptions = Object.freeze({ unflushed: true });

/** How soon, and at most how often, events a failing sink refused are offered to it again. */
const RETRY_FIRST_MS = 100;
const RETRY_MAX_MS = 2_000;
/** Events kept for a failing sink; past this, the newest refused are lost (counted). */
const MAX_UNWRITTEN = 4_096;

export interface DenialRetry {
  readonly firstMs: number;
  readonly maxMs: number;
}

/**
 * Where a denial without a claim is written, for a kernel that records acts through a ledger.
 * A denial changes nothing (no claim, no use, no effect), so by default its event is handed to
 * the sink without waiting: it joins the sink's next batch after the caller already has its
 * answer. What that costs is named in the docs: a crash can lose the events still waiting in
 * the sink's write window, never an allowed act's record (which the ledger writes before the
 * effect). Such an event is appended `unflushed` (see `AppendOptions`): a sink may commit it
 * without an fsync of its own, durable against a crash of the process at once and against
 * power loss within the bound it documents. Written before the reply, it is appended as any.
 *
 * A sink that fails to take such an event does not lose it: the recorder keeps it and offers
 * it again in the background (after 100 ms, then backing off to every 2 s), ahead of any event
 * written later, until the sink takes it. A sink that can be read is first asked whether it
 * holds the event already (a refusal whose reply was lost may have been written). Meanwhile the kernel's denials are written before
 * they answer, each after the kept ones: while the sink keeps failing each denial fails with
 * `audit_unavailable` (the kernel fails closed). The recorder is `failing` while it holds
 * events the sink refused, so it turns back by itself once the sink writes again, with no
 * request needed to find out (a host's readiness probe reads `failing`; an instance taken out
 * of rotation gets no requests). One per kernel, shared by its turns.
 */
export class DenialRecorder {
  readonly #sink: AuditSink | undefined;
  readonly #beforeReply: boolean;
  readonly #retry: DenialRetry;
  readonly #pending = new Set<Promise<void>>();
  /**
   * Denials wait here (≤ 10 ms, or 256 of them) and then start together: the reply goes out
   * first even over a synchronous driver (better-sqlite3 would otherwise commit, fsync
   * included, before the caller's answer was written), and the store shares one write among
   * them.
   */
  readonly #window = new WriteWindow(WINDOW_MS, MAX_WAITING);
  /** Events the sink refused after their reply, oldest first: written before anything else. */
  #unwritten: AuditEvent[] = [];
  #lost = 0;
  /** The one write of `#unwritten` in flight, shared by whoever needs it done. */
  #flushing: Promise<void> | undefined;
  #retryTimer: ReturnType<typeof setTimeout> | undefined;
  #retryDelay: number;
  #closed = false;

  constructor(
    sink: AuditSink | undefined,
    mode: "after-reply" | "before-reply" = "after-reply",
    retry: DenialRetry = { firstMs: RETRY_FIRST_MS, maxMs: RETRY_MAX_MS },
  ) {
    this.#sink = sink;
    this.#beforeReply = mode === "before-reply";
    this.#retry = retry;
    this.#retryDelay = retry.firstMs;
  }

  /** True while events the sink refused are still unwritten. */
  get failing(): boolean {
    return this.#unwritten.length > 0;
  }

  /** Events refused while `MAX_UNWRITTEN` were already kept: lost for good. */
  get lost(): number {
    return this.#lost;
  }

  /** Writes `event` now (resolving once written) or after the reply (returning at once). */
  record(event: AuditEvent): undefined | Promise<void> {
    const sink = this.#sink;
    if (sink === undefined) return undefined;
    if (this.#beforeReply) return append(sink, event).catch(throwUnavailable);
    if (this.failing) {
      return this.#flush()
        .then(() => append(sink, event))
        .catch(throwUnavailable);
    }
    const written: Promise<void> = this.#window
      .join()
      .then(() => sink.append(event, AFTER_REPLY))
      .then(
        () => undefined,
        () => this.#keep(event),
      )
      .finally(() => this.#pending.delete(written));
    this.#pending.add(written);
    return undefined;
  }

  /**
   * Writes every event handed over so far, now, and waits for them; offers the kept ones once
   * more (they stay kept when the sink still refuses them).
   */
  async drain(): Promise<void> {
    while (this.#pending.size > 0) {
      this.#window.release();
      await Promise.all(this.#pending);
    }
    if (this.failing) await this.#flush().catch(() => undefined);
  }

  /** Stops offering kept events in the background; what is still kept is lost. */
  close(): void {
    this.#closed = true;
    if (this.#retryTimer !== undefined) clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
  }

  #keep(event: AuditEvent): void {
    if (this.#unwritten.length >= MAX_UNWRITTEN) this.#lost++;
    else this.#unwritten.push(event);
    this.#scheduleRetry();
  }

  /** Writes the kept events in order, one write at a time shared by whoever asks. */
  #flush(): Promise<void> {
    if (this.#flushing !== undefined) return this.#flushing;
    const flushing = this.#writeKept();
    // Cleared once settled, never before it is set: with nothing kept the write ends at once,
    // and a `finally` inside it ran before `#flushing` was assigned, leaving a settled write
    // there for good (every later flush, `drain` included, then did nothing).
    this.#flushing = flushing;
    const clear = () => {
      if (this.#flushing === flushing) this.#flushing = undefined;
    };
    flushing.then(clear, clear);
    return flushing;
  }

  /** Each kept event leaves the list once the sink has taken it, or is found to hold it. */
  async #writeKept(): Promise<void> {
    const sink = this.#sink as AuditSink;
    while (this.#unwritten.length > 0) {
      const event = this.#unwritten[0] as AuditEvent;
      if (!(await auditHolds(sink, event))) await append(sink, event);
      this.#unwritten.shift();
    }
    this.#retryDelay = this.#retry.firstMs;
  }

  #scheduleRetry(): void {
    if (this.#closed || this.#retryTimer !== undefined) return;
    const delay = this.#retryDelay;
    this.#retryDelay = Math.min(delay * 2, this.#retry.maxMs);
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = undefined;
      this.#flush().catch(() => this.#scheduleRetry());
    }, delay);
    // A sink that never comes back must not keep the host's process alive.
    this.#retryTimer.unref();
  }
}

function throwUnavailable(error: unknown): never {
  throw unavailable(error);
}

async function append(sink: AuditSink, event: AuditEvent): Promise<void> {
  await sink.append(event);
}

function unavailable(cause: unknown): TesseraError {
  return new TesseraError(
    "audit_unavailable",
    "the audit sink refused the decision's event; the kernel does not answer unrecorded while it fails",
    { cause },
  );
}
