import BetterSqlite3 from "better-sqlite3";

/**
 * Counts commits at the driver: every `Statement.run` of better-sqlite3 in this process is
 * watched, and a commit is either a `COMMIT` statement (ours, or the one better-sqlite3's
 * `transaction()` runs) or a write statement run outside any transaction (an autocommit: its
 * own commit). Reads, BEGIN, ROLLBACK, savepoints and pragmas are not commits. Nothing of the
 * stores is asked: this is what the driver was told to do.
 */
export interface CommitCounter {
  readonly commits: number;
  /** Zeroes the count (after the set-up writes of a test). */
  reset(): void;
  /** Puts `Statement.run` back. */
  stop(): void;
}

const NOT_A_COMMIT = /^\s*(BEGIN|ROLLBACK|SAVEPOINT|RELEASE|PRAGMA)\b/i;
const COMMIT = /^\s*(COMMIT|END)\b/i;

interface WatchedStatement {
  readonly source: string;
  readonly reader: boolean;
  readonly database: { readonly inTransaction: boolean };
}

export function countCommits(): CommitCounter {
  const probe = new BetterSqlite3(":memory:");
  const prototype = Object.getPrototypeOf(probe.prepare("SELECT 1")) as {
    run: (this: WatchedStatement, ...args: unknown[]) => unknown;
  };
  probe.close();
  const original = prototype.run;
  let commits = 0;
  prototype.run = function run(this: WatchedStatement, ...args: unknown[]) {
    const autocommit = !this.database.inTransaction;
    const result = original.apply(this, args);
    if (COMMIT.test(this.source)) commits++;
    else if (autocommit && !this.reader && !NOT_A_COMMIT.test(this.source)) commits++;
    return result;
  };
  return {
    get commits() {
      return commits;
    },
    reset() {
      commits = 0;
    },
    stop() {
      prototype.run = original;
    },
  };
}
