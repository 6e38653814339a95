import { close, closeSync, fsync, fsyncSync, open, openSync } from "node:fs";

/**
 * How long a commit made without its fsync (synchronous=NORMAL: a claim receipt, a denial's
 * event written after its reply) may stay out of stable storage, in milliseconds.
 */
export const UNFLUSHED_BOUND_MS = 1000;

/**
 * Bounds how long unflushed commits stay unsynced. In WAL a commit at synchronous=NORMAL has
 * its frames written to the OS before COMMIT returns, so a crash of the process loses none
 * of it; only a power loss or an OS crash can, until the WAL is fsynced. The next commit at
 * FULL does that, but under traffic made only of such commits (a stream of denials) none
 * may come. So the first unflushed commit since the last sync arms a timer, and when it
 * fires the WAL file is fsynced: every frame written before then, by any connection, is on
 * disk within `UNFLUSHED_BOUND_MS` (plus the fsync itself).
 *
 * The fsync runs on libuv's thread pool, off the event loop, through a descriptor of its own:
 * fsync flushes the file (its inode), not the descriptor that wrote it, so it syncs the
 * frames SQLite wrote exactly as SQLite's own would. The descriptor is opened at the first
 * sync and kept until `close`: an open and a close around every fsync were two more trips
 * through the thread pool, each waking the event loop (measured in the MCP gateway at 8 calls
 * in flight: 0.34 of each per call, about 140 µs of the loop's time per call under load). It
 * stays right while the connection is open: SQLite deletes a WAL only when its last
 * connection closes, and resets or truncates it in place otherwise (same inode). The timer is
 * unref'd: it never keeps a process up; `close` syncs what is still unsynced before the
 * connection closes.
 *
 * A sync that fails is tried again after the same bound, and until one succeeds `failing`
 * is set: writes that would skip their fsync take it again (the audit sink's), so the
 * window cannot grow while the disk refuses.
 */
export class WalSync {
  readonly #walPath: string;
  readonly #boundMs: number;
  /** An unflushed commit happened since the last sync started. */
  #dirty = false;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #inFlight: Promise<void> | undefined;
  #failing = false;
  /** Syncs completed (for tests and the docs' claim: observed, not assumed). */
  synced = 0;
  /** The sync `flush` callers wait on, and the one queued behind it for later commits. */
  #flushing: Promise<void> | undefined;
  #flushNext: Promise<void> | undefined;
  /** The WAL's descriptor, once a sync opened it (the open in flight while it does). */
  #fd: number | undefined;
  #opening: Promise<number | undefined> | undefined;
  /** Async fsyncs in flight on `#fd`: `close` closes it only after the last one. */
  #using = 0;
  /** A descriptor `close` left to the last fsync in flight to close. */
  #closeAfterUse: number | undefined;
  #closed = false;
  readonly #fire = () => {
    this.#timer = undefined;
    // A `flush` since the timer was armed covered what armed it.
    if (!this.#dirty) return;
    this.#inFlight = this.#sync();
  };

  constructor(databasePath: string, boundMs = UNFLUSHED_BOUND_MS) {
    // SQLite's WAL is the database's path with "-wal" appended.
    this.#walPath = `${databasePath}-wal`;
    this.#boundMs = boundMs;
  }

  get failing(): boolean {
    return this.#failing;
  }

  /** Frames are written but not synced: they will be within the bound. */
  get pending(): boolean {
    return this.#dirty || this.#inFlight !== undefined;
  }

  /** An unflushed commit returned: arms the timer unless it is armed already. */
  committed(): void {
    this.#dirty = true;
    if (this.#timer !== undefined) return;
    this.#timer = setTimeout(this.#fire, this.#boundMs);
    this.#timer.unref?.();
  }

  /**
   * Resolves once every frame committed before this call is on disk: the fsync of a commit
   * made at synchronous=NORMAL, run on libuv's thread pool instead of inside COMMIT on the
   * event loop. Commits made while one fsync is in flight share the next one (its start
   * follows their commits). Rejects when the fsync fails; a missing WAL was checkpointed,
   * which syncs it, so that resolves.
   */
  flush(): Promise<void> {
    if (this.#flushing === undefined) {
      this.#flushing = this.#syncForFlush();
      return this.#flushing;
    }
    // The fsync in flight may have started before this commit: the next one covers it.
    this.#flushNext ??= this.#flushing.then(
      () => this.#startNext(),
      () => this.#startNext(),
    );
    return this.#flushNext;
  }

  #startNext(): Promise<void> {
    this.#flushNext = undefined;
    this.#flushing = this.#syncForFlush();
    return this.#flushing;
  }

  async #syncForFlush(): Promise<void> {
    try {
      const error = await this.#syncWal();
      if (error !== undefined) throw error;
    } finally {
      if (this.#flushNext === undefined) this.#flushing = undefined;
    }
  }

  /** Resolves once the sync started by the timer (if any) is over. */
  async settled(): Promise<void> {
    await this.#inFlight;
  }

  /** Before the connection closes: syncs now, on this thread, what is still unsynced. */
  close(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#closed = true;
    const fd = this.#fd;
    this.#fd = undefined;
    if (this.#dirty) {
      this.#dirty = false;
      try {
        if (fd !== undefined) fsyncSync(fd);
        else {
          const own = openSync(this.#walPath, "r");
          try {
            fsyncSync(own);
          } finally {
            closeSync(own);
          }
        }
      } catch {
        // Closing goes on: a missing WAL was checkpointed (and synced) already, and a failing
        // disk is reported by the next write that commits at FULL.
      }
    }
    // An fsync still on the thread pool keeps the descriptor until it returns: closed now, its
    // number could be reused by another file and that file synced instead.
    if (fd !== undefined && this.#using === 0) close(fd, () => {});
    else if (fd !== undefined) this.#closeAfterUse = fd;
  }

  async #sync(): Promise<void> {
    try {
      await this.#syncWal();
    } finally {
      this.#inFlight = undefined;
    }
  }

  /**
   * One fsync of the WAL, covering everything written before it starts; the error when it
   * failed (then `failing`, and the timer re-armed to try again). A missing WAL is no error:
   * the last connection checkpointed it (synced) and deleted it.
   */
  async #syncWal(): Promise<unknown> {
    this.#dirty = false;
    try {
      await this.#fsyncWal();
      this.synced++;
      this.#failing = false;
      return undefined;
    } catch (error) {
      if ((error as { code?: unknown }).code === "ENOENT") return undefined;
      this.#failing = true;
      this.committed();
      return error;
    }
  }

  /** One fsync of the WAL through the kept descriptor (opened first when there is none). */
  async #fsyncWal(): Promise<void> {
    const fd = this.#fd ?? (await this.#openWal());
    if (fd === undefined) return;
    this.#using++;
    try {
      await new Promise<void>((resolve, reject) =>
        fsync(fd, (error) => (error ? reject(error) : resolve())),
      );
    } finally {
      this.#using--;
      const left = this.#closeAfterUse;
      if (left !== undefined && this.#using === 0) {
        this.#closeAfterUse = undefined;
        close(left, () => {});
      }
    }
  }

  /**
   * Opens the WAL once for every later sync (one open at a time). A missing WAL throws ENOENT
   * (the caller's "checkpointed, so synced"); after `close`, nothing is kept open.
   * Not kept either when the open fails: the next sync tries again.
   */
  #openWal(): Promise<number | undefined> {
    this.#opening ??= new Promise<number | undefined>((resolve, reject) =>
      open(this.#walPath, "r", (error, fd) => {
        this.#opening = undefined;
        if (error) {
          reject(error);
          return;
        }
        if (this.#closed) {
          // Closed meanwhile: `close` synced what was unsynced on this thread already.
          close(fd, () => {});
          resolve(undefined);
          return;
        }
        this.#fd = fd;
        resolve(fd);
      }),
    );
    return this.#opening;
  }
}
