import { TesseraError } from "../contracts/errors.js";
import type { AuditEvent } from "../contracts/schemas.js";
import type { AppendOptions, AuditSink } from "../ports/audit-sink.js";
import { WriteWindow } from "../stores/write-window.js";

/** How long a denial's event waits for others to share its write, and how many may wait. */
const WINDOW_MS = 10;
const MAX_WAITING = 256;
/** An event answered already, which changes nothing: see `AppendOptions`. */
const AFTER_REPLY: AppendOptions = Object.freeze({ unflushed: true });

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
 * A sink that fails to take such an event turns the kernel's denials back to writing before
 * they answer: while it keeps failing each denial fails with `audit_unavailable` (the kernel
 * fails closed), and the first write that lands turns it back. One per kernel, shared by its
 * turns.
 */
export class DenialRecorder {
  readonly #sink: AuditSink | undefined;
  readonly #beforeReply: boolean;
  readonly #pending = new Set<Promise<void>>();
  /**
   * Denials wait here (≤ 10 ms, or 256 of them) and then start together: the reply goes out
   * first even over a synchronous driver (better-sqlite3 would otherwise commit, fsync
   * included, before the caller's answer was written), and the store shares one write among
   * them.
   */
  readonly #window = new WriteWindow(WINDOW_MS, MAX_WAITING);
  #failing = false;

  constructor(sink: AuditSink | undefined, mode: "after-reply" | "before-reply" = "after-reply") {
    this.#sink = sink;
    this.#beforeReply = mode === "before-reply";
  }

  get failing(): boolean {
    return this.#failing;
  }

  /** Writes `event` now (resolving once written) or after the reply (returning at once). */
  record(event: AuditEvent): undefined | Promise<void> {
    const sink = this.#sink;
    if (sink === undefined) return undefined;
    if (this.#beforeReply || this.#failing) {
      return append(sink, event).then(
        () => {
          this.#failing = false;
        },
        (error: unknown) => {
          this.#failing = true;
          throw unavailable(error);
        },
      );
    }
    const written: Promise<void> = this.#window
      .join()
      .then(() => sink.append(event, AFTER_REPLY))
      .then(
        () => undefined,
        () => {
          this.#failing = true;
        },
      )
      .finally(() => this.#pending.delete(written));
    this.#pending.add(written);
    return undefined;
  }

  /** Writes every event handed over so far, now, and waits for them. */
  async drain(): Promise<void> {
    while (this.#pending.size > 0) {
      this.#window.release();
      await Promise.all(this.#pending);
    }
  }
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
