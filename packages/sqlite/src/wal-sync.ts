import { closeSync, fstatSync, fsync, openSync, statSync } from "node:fs";

/**
 * Makes committed WAL frames durable off the event loop: `fsync` of the `-wal` file on
 * libuv's thread pool, for batches committed at synchronous=NORMAL (frames written, not
 * synced). What FULL does inline after every commit, this does once for every commit made
 * before it started, while the thread goes on serving requests.
 *
 * `fsync` is per file, not per descriptor (Linux and POSIX sync the file's data whichever
 * descriptor names it), so syncing through a descriptor of our own makes SQLite's writes
 * durable. The descriptor must name the file SQLite writes: the `-wal` path is checked to
 * still be it before each sync, and a file replaced under the connection fails the sync
 * (its callers fail closed, as `SqliteDatabase` does for a replaced database file).
 */
export class WalSync {
  readonly #path: string;
  #fd: number | undefined;
  #ino = 0;
  #dev = 0;
  /** The sync on the thread pool now, if any. */
  #running: Promise<void> | undefined;
  /** Callers whose commits came after `#running` started: they need the next sync. */
  #next: { promise: Promise<void>; resolve: () => void; reject: (e: unknown) => void } | undefined;
  #closing = false;

  constructor(databasePath: string) {
    this.#path = `${databasePath}-wal`;
  }

  /** Resolves once every frame committed before this call is on disk. */
  afterCommit(): Promise<void> {
    if (this.#running === undefined) {
      this.#running = this.#start();
      return this.#running;
    }
    // The running sync may have been issued before this commit's frames were written.
    if (this.#next === undefined) {
      let resolve!: () => void;
      let reject!: (e: unknown) => void;
      const promise = new Promise<void>((ok, fail) => {
        resolve = ok;
        reject = fail;
      });
      this.#next = { promise, resolve, reject };
    }
    return this.#next.promise;
  }

  /**
   * Lets go of the descriptor once no sync is running or waiting: commits already made still
   * get theirs (their callers wait for it, the connection's close does not).
   */
  close(): void {
    this.#closing = true;
    if (this.#running === undefined) this.#release();
  }

  #release(): void {
    const fd = this.#fd;
    this.#fd = undefined;
    if (fd === undefined) return;
    try {
      closeSync(fd);
    } catch {
      // Closing a descriptor no longer needed cannot lose anything.
    }
  }

  #start(): Promise<void> {
    const synced = new Promise<void>((resolve, reject) => {
      let fd: number;
      try {
        fd = this.#descriptor();
      } catch (error) {
        reject(error);
        return;
      }
      fsync(fd, (error) => (error ? reject(error) : resolve()));
    });
    const after = () => {
      this.#running = undefined;
      const next = this.#next;
      this.#next = undefined;
      if (next !== undefined) {
        this.#running = this.#start();
        this.#running.then(next.resolve, next.reject);
      } else if (this.#closing) {
        this.#release();
      }
    };
    synced.then(after, after);
    return synced;
  }

  /** Our descriptor of the `-wal` file, opened on first use and checked to still be it. */
  #descriptor(): number {
    const now = statSync(this.#path);
    if (this.#fd === undefined) {
      if (this.#closing) throw new Error("the connection is closed");
      const fd = openSync(this.#path, "r");
      const opened = fstatSync(fd);
      if (opened.ino !== now.ino || opened.dev !== now.dev) {
        closeSync(fd);
        throw new WalReplaced();
      }
      this.#fd = fd;
      this.#ino = opened.ino;
      this.#dev = opened.dev;
    } else if (now.ino !== this.#ino || now.dev !== this.#dev) {
      throw new WalReplaced();
    }
    return this.#fd;
  }
}

/** The `-wal` path names another file than the one being synced. */
class WalReplaced extends Error {
  readonly code = "write-ahead log file missing or replaced";
}
