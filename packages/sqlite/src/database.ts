import { statSync } from "node:fs";
import { dirname } from "node:path";
import { performance } from "node:perf_hooks";
import BetterSqlite3 from "better-sqlite3";
import type { SqliteConfig } from "./config.js";
import { GroupCommit } from "./group-commit.js";
import { refuseSecondName, SHARE_THE_DIRECTORY } from "./single-name.js";
import { type UnavailableCode, unavailable } from "./unavailable.js";
import { WalSync } from "./wal-sync.js";

/**
 * One better-sqlite3 connection shared by the ports of a bundle. Every statement runs
 * through `run`, which turns any driver failure (locked past the busy timeout, I/O error,
 * closed connection) into the calling port's `*_unavailable` error, so the kernel and the
 * gate fail closed. Statements are prepared once and always parameterised.
 *
 * Before every operation the path is checked to still name the file this connection opened
 * (same device and inode). An open connection keeps writing to a file that was deleted,
 * moved or replaced, while every process that opens the path afterwards gets another file:
 * claims and spends would silently split in two. So a missing or replaced file fails closed,
 * as a missing claim directory does, and is never recreated under a running connection.
 *
 * The same check refuses a file that gained a second name (a hard link; see `single-name.ts`
 * for why that splits the store): the link count comes from the same `stat`. Mount points
 * are checked at open only, which is enough: the process that opens the mounted name is the
 * one refused.
 *
 * Two reads are the exception (`versionRead`): a holder's grant version, all a warm turn
 * reads to open, and a grant's usage as the usage port's `getUsage` reports it (discovery,
 * on every denied call of a bounded ticket's holder). They check the path only when the last
 * check that passed is older than `VERSION_CHECK_MS`, and always after a check that failed.
 * Such a read is at most that much older than it looks, which neither use can tell from a
 * slower answer: a lease keeps its authority until it closes anyway (revocations landing on
 * the next turn), and a usage read only informs (which refusal a denial says, which grant an
 * act will try to spend under the write lock). A `stat` per read was half the cost of
 * opening a warm turn. Writes and every other read, the grants themselves included, still
 * check before each operation.
 */
export class SqliteDatabase {
  readonly config: SqliteConfig;
  /**
   * The identity of this database's grant versions (`GrantSource.versionSpace`): the grant
   * store hands it out and the act ledger checks against it, both over this connection.
   */
  readonly versionSpace: object = Object.freeze({});
  readonly #db: BetterSqlite3.Database;
  readonly #statements = new Map<string, BetterSqlite3.Statement>();
  readonly #identity: FileIdentity | undefined;
  readonly #group: GroupCommit;
  /** `synchronous` is below the configured level after an unflushed commit failed to restore it. */
  #lowered = false;
  /** Syncs the WAL within a second of an unflushed commit; only where commits fsync (FULL). */
  readonly #walSync: WalSync | undefined;
  /** `performance.now()` of the last file check that passed; -Infinity after one failed. */
  #checkedAt = Number.NEGATIVE_INFINITY;
  /** Answers of `cachedRead`, valid while `#changes` and the file's data version stand. */
  readonly #answers = new Map<string, unknown>();
  /** Bumped by every statement that is not a read, so by every write on this connection. */
  #changes = 0;
  #answersAt: { readonly changes: number; readonly dataVersion: unknown } = {
    changes: -1,
    dataVersion: undefined,
  };
  /**
   * The last value a statement on this connection passed to `tessera_note(value)`, a SQL
   * function of this connection only (it answers 1, true). A write reads back what it wrote
   * through it instead of RETURNING, whose result set cost a c=1 consume about 6% of its
   * CPU (usage-store.ts). Statements run one at a time, so one slot per connection is exact.
   */
  noted = 0;

  private constructor(config: SqliteConfig, db: BetterSqlite3.Database) {
    this.config = config;
    this.#db = db;
    this.#identity = config.path === ":memory:" ? undefined : identify(config.path);
    // One file check and one BEGIN IMMEDIATE … COMMIT per batch, not per write; a write
    // alone is its own autocommit statement, as it was before batching.
    // A receipt's commit skips its fsync only where one would be paid: on disk at FULL.
    const lowerable = this.#identity !== undefined && config.synchronous === "FULL";
    this.#walSync = lowerable ? new WalSync(config.path) : undefined;
    // directOnly: a trigger or view in a tampered file cannot call it.
    db.function("tessera_note", { deterministic: false, directOnly: true }, (value: unknown) => {
      this.noted = Number(value);
      return 1;
    });
    this.#group = new GroupCommit(
      (work) => this.run("store_unavailable", work),
      (work) => this.run("store_unavailable", () => this.batch(work)),
      lowerable ? (commit) => this.#unflushed(commit) : undefined,
      lowerable ? () => (this.#walSync as WalSync).flush() : undefined,
    );
  }

  /** Opens the file (creating it only when `config.create`) and sets the pragmas. */
  static open(config: SqliteConfig, failCode: UnavailableCode): SqliteDatabase {
    let db: BetterSqlite3.Database | undefined;
    const onDisk = config.path !== ":memory:";
    try {
      // Before opening, so a second name is not even read through (which would create its own
      // side files); after, for a file created just now and for the side files SQLite made.
      if (onDisk) {
        refuseSecondName(config.path);
        // The driver reports a missing folder as a bare TypeError; the folder's own error
        // carries the OS's code (ENOENT, ENOTDIR, EACCES), which the opener names.
        statSync(dirname(config.path));
      }
      db = new BetterSqlite3(config.path, { fileMustExist: !config.create });
      db.pragma(`busy_timeout = ${config.busyTimeoutMs}`);
      if (onDisk) {
        const handle = db;
        retryWhileBusy(() => handle.pragma("journal_mode = WAL"), config.busyTimeoutMs);
        refuseSecondName(config.path);
      }
      db.pragma(`synchronous = ${config.synchronous}`);
      db.pragma("foreign_keys = ON");
      return new SqliteDatabase(config, db);
    } catch (error) {
      db?.close();
      throw unavailable(failCode, error);
    }
  }

  get open(): boolean {
    return this.#db.open;
  }

  /** Inside a BEGIN … COMMIT (a group-commit batch, or `immediate`). */
  get inTransaction(): boolean {
    return this.#db.inTransaction;
  }

  /** Runs `work`; a driver error becomes `TesseraError(code)`, Tessera's own errors pass. */
  run<T>(code: UnavailableCode, work: () => T): T {
    try {
      this.#checkSameFile();
      if (this.#lowered) this.#restoreSynchronous();
      return work();
    } catch (error) {
      throw unavailable(code, error);
    }
  }

  /**
   * `run` for the grant-version and usage reads: the file check is skipped when one passed
   * within the last `VERSION_CHECK_MS` (see the class comment). A read only: it never
   * restores `synchronous`, which only a write needs.
   */
  versionRead<T>(code: UnavailableCode, work: () => T): T {
    try {
      if (performance.now() - this.#checkedAt > VERSION_CHECK_MS) this.#checkSameFile();
      return work();
    } catch (error) {
      throw unavailable(code, error);
    }
  }

  /**
   * `versionRead` answered from memory while nothing can have changed the answer: no write on
   * this connection since (every statement that is not a read counts, whatever it touched) and
   * no commit by any other connection (`PRAGMA data_version`, which SQLite moves exactly then).
   * A warm service over one file asks the same two things on every denial, a holder's grant
   * version and a ticket's usage, between commits that come about once a write window. The
   * `data_version` check is a statement too, with its own read lock: measured alone with the
   * driver (Node 20, better-sqlite3 12), 3.2-3.5 µs against 4.3-4.8 µs for the version read
   * it saves, so a hit saves about a quarter of a read; the service's denied send gained
   * 4-11% from it when it came in (CHANGELOG). `key` names the query and its parameters.
   */
  cachedRead<T>(code: UnavailableCode, key: string, work: () => T): T {
    return this.versionRead(code, () => {
      const dataVersion = this.statement("PRAGMA data_version").pluck().get();
      const at = this.#answersAt;
      if (at.changes !== this.#changes || at.dataVersion !== dataVersion) {
        this.#answers.clear();
        this.#answersAt = { changes: this.#changes, dataVersion };
      } else if (this.#answers.has(key)) {
        return this.#answers.get(key) as T;
      }
      const value = work();
      if (this.#answers.size >= MAX_CACHED_ANSWERS) this.#answers.clear();
      this.#answers.set(key, value);
      return value;
    });
  }

  /**
   * A write that shares its commit with every other write issued in the same tick by any
   * port on this connection (see `group-commit.ts`); resolves once that commit returned.
   * `flush = false` (a claim receipt, a denial's event after its reply) lets a batch of such
   * writes alone skip its fsync; the WAL is then synced within `UNFLUSHED_BOUND_MS`.
   */
  write<T>(code: UnavailableCode, work: () => T, flush = true): Promise<T> {
    return this.#group.submit(code, work, flush);
  }

  /**
   * `write` that always joins the tick's batch, even when the connection was idle (see
   * `GroupCommit.enqueue`): for acts, whose batch is one commit however many start together.
   */
  writeBatched<T>(code: UnavailableCode, work: () => T): Promise<T> {
    return this.#group.enqueue(code, work);
  }

  statement(sql: string): BetterSqlite3.Statement {
    let statement = this.#statements.get(sql);
    if (!statement) {
      statement = this.#db.prepare(sql);
      this.#statements.set(sql, statement);
    }
    // Taken to be run now (no caller keeps one): a write ends every cached answer.
    if (!statement.reader) this.#changes++;
    return statement;
  }

  exec(sql: string): void {
    this.#changes++;
    this.#db.exec(sql);
  }

  pragma(name: string): unknown {
    this.#changes++;
    return this.#db.pragma(name, { simple: true });
  }

  /** Runs `work` inside BEGIN IMMEDIATE: the write lock is taken before anything is read. */
  immediate<T>(work: () => T): T {
    return this.#db.transaction(work).immediate();
  }

  /**
   * The WAL sync behind unflushed commits: `failing` while a background sync fails, and the
   * count and state tests observe. Undefined where no commit skips its fsync.
   */
  get walSync(): WalSync | undefined {
    return this.#walSync;
  }

  close(): void {
    if (!this.#db.open) return;
    this.#walSync?.close();
    this.#db.close();
  }

  /**
   * Runs `commit` (an autocommit statement or a whole BEGIN … COMMIT) at synchronous=NORMAL:
   * in WAL its frames are written but not fsynced, and the next commit at FULL syncs them
   * with its own, or the WAL sync does within `UNFLUSHED_BOUND_MS` (`wal-sync.ts`). The
   * pragma is set outside the transaction and put back right after, so no other write ever
   * commits at NORMAL; were putting it back to fail, every later write tries again first and
   * fails closed (`run`) rather than commit unflushed.
   */
  #unflushed(commit: () => unknown): unknown {
    this.statement("PRAGMA synchronous = NORMAL").run();
    try {
      const value = commit();
      // Committed without its fsync: synced within the bound (wal-sync.ts).
      this.#walSync?.committed();
      return value;
    } finally {
      try {
        this.#restoreSynchronous();
      } catch {
        // Left lowered: the next write restores it first or fails (see above).
        this.#lowered = true;
      }
    }
  }

  #restoreSynchronous(): void {
    this.statement(`PRAGMA synchronous = ${this.config.synchronous}`).run();
    this.#lowered = false;
  }

  /**
   * BEGIN IMMEDIATE … COMMIT with cached statements: `immediate` builds a transaction
   * wrapper per call, which at one small batch per tick costs more than the statements.
   * Also what a write alone of several statements (an act, an append) opens for itself.
   * Not nestable: only outside a transaction.
   */
  batch<T>(work: () => T): T {
    this.statement("BEGIN IMMEDIATE").run();
    try {
      const value = work();
      this.statement("COMMIT").run();
      return value;
    } catch (error) {
      try {
        if (this.#db.inTransaction) this.statement("ROLLBACK").run();
      } catch {
        // The batch failed already; a rollback that fails too leaves nothing more to say,
        // and SQLite rolls an unfinished transaction back when the connection closes.
      }
      throw error;
    }
  }

  #checkSameFile(): void {
    if (!this.#identity) return;
    // Cleared first: after a check that throws, the next version read checks again.
    this.#checkedAt = Number.NEGATIVE_INFINITY;
    let now: FileIdentity | undefined;
    try {
      // The Stats object as it is: copying three fields out cost a second object per write.
      now = statSync(this.config.path, { throwIfNoEntry: false });
    } catch {
      throw new FileMoved();
    }
    if (now === undefined) throw new FileMoved();
    if (now.dev !== this.#identity.dev || now.ino !== this.#identity.ino) throw new FileMoved();
    if (now.nlink > 1) throw new SecondName();
    this.#checkedAt = performance.now();
  }
}

/**
 * How old the file check behind a grant-version read may be, in milliseconds: a check per
 * millisecond costs nothing measurable, and a millisecond is far below the life of any turn
 * (see `SqliteDatabase`).
 */
export const VERSION_CHECK_MS = 1;

/** Answers `cachedRead` keeps at most; past it they are dropped wholesale (bounded memory). */
const MAX_CACHED_ANSWERS = 4_096;

/** A `cachedRead` key: length-prefixed, so no two (kind, a, b) make the same one. */
export function cacheKey(kind: string, a: string, b: string): string {
  return `${kind}\u0000${a.length}:${a}${b}`;
}

interface FileIdentity {
  readonly dev: number;
  readonly ino: number;
  readonly nlink: number;
}

function identify(path: string): FileIdentity {
  const { dev, ino, nlink } = statSync(path);
  return { dev, ino, nlink };
}

/** The path no longer names the file this connection has open. */
class FileMoved extends Error {
  readonly code = "database file missing or replaced";
}

/** The file gained a hard link: another process may be writing its own WAL beside it. */
class SecondName extends Error {
  readonly code = `database file has a second name; ${SHARE_THE_DIRECTORY}`;
}

/**
 * Switching a new file to WAL needs an exclusive lock. When several processes open the same
 * new file at once, SQLite reports SQLITE_BUSY at once rather than wait (waiting could
 * deadlock two connections that both hold a shared lock), so the switch is retried here,
 * within the same busy timeout.
 */
function retryWhileBusy(work: () => unknown, timeoutMs: number): void {
  const deadline = Date.now() + timeoutMs;
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (let delay = 1; ; delay = Math.min(delay * 2, 50)) {
    try {
      work();
      return;
    } catch (error) {
      const busy = String((error as { code?: unknown })?.code).startsWith("SQLITE_BUSY");
      if (!busy || Date.now() + delay > deadline) throw error;
      Atomics.wait(pause, 0, 0, delay);
    }
  }
}
