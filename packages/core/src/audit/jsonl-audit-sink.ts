import { closeSync, fsyncSync, openSync, writeSync } from "node:fs";
import { TesseraError } from "../contracts/errors.js";
import type { AuditEvent } from "../contracts/schemas.js";
import { checkPageSize, parseAuditEvent } from "../contracts/store-input.js";
import type { AuditFilter, AuditPageOptions, ReadableAuditSink } from "../ports/audit-sink.js";
import { auditStreamOf, linkAuditEvent } from "./chain.js";
import { FileLock } from "./file-lock.js";
import { JsonlHeads } from "./jsonl-heads.js";
import { readLog, readLogPages, systemReason } from "./jsonl-read.js";

export interface JsonlAuditSinkOptions {
  /**
   * Durability of each event.
   * - `"every"`: fsync after each event before `append` returns. An event survives power loss,
   *   at the cost of one disk flush per decision (milliseconds on most disks).
   * - `"none"` (default): each event is written with one `write(2)` before `append` returns, so
   *   it survives the process crashing, but may be lost if the machine loses power before the
   *   OS flushes its page cache. `close()` always fsyncs.
   */
  readonly fsync?: "every" | "none";
  /**
   * How long an append waits for the log's lock (held by another process's append) before it
   * fails with `audit_unavailable`. Default 10,000 ms. The wait blocks the thread, as the
   * append's own write does: the lock is held for one short append, so waits are brief
   * unless a holder is stuck.
   */
  readonly lockWaitMs?: number;
}

/**
 * An append-only audit log, one JSON event per line. The file is opened with `O_APPEND`, so
 * every write lands at the end even with several writers, and each event is one `write(2)` of
 * one line: lines from concurrent processes do not interleave (POSIX appends of this size are
 * atomic on local filesystems). The sink never rewrites or truncates the file.
 *
 * Each event is linked into its stream's hash chain (see `chain.ts`). Writers in several
 * processes share one chain per stream, so an append reads the stream's head and writes under
 * a lock file beside the log (`<path>.lock`, see `file-lock.ts`); the heads are read from the
 * log's end and cached while no other process appends. Appends stay synchronous, as they
 * were: the event is in the file, in the caller's order, when `append` returns.
 */
export class JsonlAuditSink implements ReadableAuditSink {
  readonly #path: string;
  readonly #everyEvent: boolean;
  readonly #lock: FileLock;
  readonly #heads: JsonlHeads;
  #fd: number | undefined;

  private constructor(path: string, fd: number, options: JsonlAuditSinkOptions) {
    this.#path = path;
    this.#fd = fd;
    this.#everyEvent = options.fsync === "every";
    this.#lock = new FileLock(`${path}.lock`, options.lockWaitMs ?? 10_000);
    this.#heads = new JsonlHeads(fd);
  }

  /** Opens (creating if absent, mode 0600) the log at `path` for appending. */
  static open(path: string, options: JsonlAuditSinkOptions = {}): JsonlAuditSink {
    const wait = options.lockWaitMs;
    if (wait !== undefined && !(Number.isSafeInteger(wait) && wait >= 0)) {
      throw new TesseraError("invalid_input", "lockWaitMs must be a non-negative whole number");
    }
    try {
      // Read as well as append: the stream heads are read through the same descriptor.
      return new JsonlAuditSink(path, openSync(path, "a+", 0o600), options);
    } catch (error) {
      throw new TesseraError(
        "audit_unavailable",
        `cannot open the audit log for appending${systemReason(error)}`,
        { cause: error },
      );
    }
  }

  append(event: AuditEvent): void {
    const fd = this.#fd;
    if (fd === undefined) throw new TesseraError("audit_unavailable", "the audit log is closed");
    // A host's own event is held to what every sink keeps: one the log took unchecked (a typo
    // in its reason) made every later read of the whole log fail.
    const valid = parseAuditEvent(event);
    const stream = auditStreamOf(valid);
    try {
      this.#write(fd, valid, stream);
    } catch (error) {
      if (error instanceof TesseraError) throw error;
      // A disk error (ENOSPC, EIO …) from the write, its fsync or the lock file: typed, as
      // every failure of a sink is, with the system's error as its cause.
      throw new TesseraError("audit_unavailable", "the audit log could not be written", {
        cause: error,
      });
    }
  }

  #write(fd: number, valid: AuditEvent, stream: string): void {
    this.#lock.hold(() => {
      const linked = linkAuditEvent(valid, this.#heads.headOf(stream));
      const line = Buffer.from(`${JSON.stringify(linked)}\n`, "utf8");
      const written = writeSync(fd, line);
      if (written !== line.length) {
        throw new TesseraError("audit_unavailable", "the audit log took part of an event");
      }
      this.#heads.appended(stream, { seq: linked.seq, hash: linked.hash }, written);
      // Inside the lock: the next writer links to this event only once it is on disk.
      if (this.#everyEvent) fsyncSync(fd);
    });
  }

  /**
   * Reads the whole log back. A line that is not a valid event (a torn last line after a
   * crash, or tampering) is refused loudly rather than skipped.
   */
  read(filter: AuditFilter = {}) {
    return readLog(this.#path, filter);
  }

  /**
   * The log at `path` opened to be read only: no descriptor for appending, no lock file, so a
   * user who may read the log but not write it (an auditor) can list and verify it. Its
   * `append` refuses with `audit_unavailable`.
   */
  static openToRead(path: string): ReadableAuditSink & { close(): void } {
    return Object.freeze({
      append: () => {
        throw new TesseraError("audit_unavailable", "this audit trail was opened to be read only");
      },
      read: (filter?: AuditFilter) => readLog(path, filter),
      readPages: (options?: AuditPageOptions) => readLogPages(path, checkPageSize(options)),
      close: () => undefined,
    });
  }

  readPages(options?: AuditPageOptions): AsyncIterable<readonly AuditEvent[]> {
    return readLogPages(this.#path, checkPageSize(options));
  }

  close(): void {
    const fd = this.#fd;
    if (fd === undefined) return;
    this.#fd = undefined;
    this.#lock.close();
    // A failed flush (EIO, or a log that is no file: EINVAL) is the sink's failure, typed as
    // an append's is; the descriptor is let go either way.
    try {
      try {
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
    } catch (error) {
      throw new TesseraError(
        "audit_unavailable",
        `the audit log could not be flushed and closed${systemReason(error)}`,
        { cause: error },
      );
    }
  }
}
