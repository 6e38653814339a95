/**
 * Round trips counted at the driver, for tests and the benchmark: what the stores asked
 * better-sqlite3, pg or ioredis to do, seen where the driver does it, never what a store says
 * of itself. Each counter wraps one method of the driver's prototype (so every connection of
 * the process is seen) until `stop()`. The driver is passed in: the testkit depends on none.
 *
 * `writes` counts the durable round trips (a SQLite commit, a PostgreSQL statement that writes,
 * a Redis script or write command); `total` every statement or command, reads included.
 */
export interface DriverCounter {
  readonly writes: number;
  readonly total: number;
  /** Names (or first words) of what was counted as a write since the last reset. */
  readonly written: readonly string[];
  reset(): void;
  stop(): void;
}

function counter(
  restore: () => void,
): DriverCounter & { note(name: string, write: boolean): void } {
  let writes = 0;
  let total = 0;
  let written: string[] = [];
  return {
    get writes() {
      return writes;
    },
    get total() {
      return total;
    },
    get written() {
      return written;
    },
    note(name, write) {
      total++;
      if (write) {
        writes++;
        written.push(name);
      }
    },
    reset() {
      writes = 0;
      total = 0;
      written = [];
    },
    stop: restore,
  };
}

interface SqliteStatement {
  readonly source: string;
  readonly reader: boolean;
  readonly database: { readonly inTransaction: boolean };
}

const SQLITE_NOT_A_COMMIT = /^\s*(BEGIN|ROLLBACK|SAVEPOINT|RELEASE|PRAGMA)\b/i;
const SQLITE_COMMIT = /^\s*(COMMIT|END)\b/i;

/**
 * SQLite (better-sqlite3): a write is a commit, either a `COMMIT` or a write statement run
 * outside a transaction (its own commit). `Database` is better-sqlite3's default export.
 */
export function countSqliteCommits(
  Database: new (filename: string) => { prepare(sql: string): object; close(): void },
): DriverCounter {
  const probe = new Database(":memory:");
  const prototype = Object.getPrototypeOf(probe.prepare("SELECT 1")) as {
    run: (this: SqliteStatement, ...args: unknown[]) => unknown;
  };
  probe.close();
  const original = prototype.run;
  const count = counter(() => {
    prototype.run = original;
  });
  prototype.run = function run(this: SqliteStatement, ...args: unknown[]) {
    const autocommit = !this.database.inTransaction;
    const result = original.apply(this, args);
    const commit =
      SQLITE_COMMIT.test(this.source) ||
      (autocommit && !this.reader && !SQLITE_NOT_A_COMMIT.test(this.source));
    count.note(this.source.trim().split(/\s+/)[0] ?? "", commit);
    return result;
  };
  return count;
}

const PG_WRITE =
  /^\s*(INSERT|UPDATE|DELETE|WITH|CREATE|ALTER|DROP)\b|record_acts|withdraw_act|advisory/i;
const PG_FUNCTIONS = /record_acts|withdraw_act/;

/**
 * PostgreSQL (pg): every statement any `pg.Client` sends; a write is one that changes rows
 * (INSERT, UPDATE, DELETE, a CTE, the act ledger's `record_acts` and `withdraw_act`), named
 * by its first word or by the function it calls. `Client` is `pg.Client`.
 */
export function countPostgresStatements(Client: { prototype: object }): DriverCounter {
  const prototype = Client.prototype as { query: (...args: unknown[]) => unknown };
  const original = prototype.query;
  const count = counter(() => {
    prototype.query = original;
  });
  prototype.query = function query(this: unknown, ...args: unknown[]) {
    const first = args[0];
    const text =
      typeof first === "string" ? first : String((first as { text?: unknown } | null)?.text ?? "");
    const write = PG_WRITE.test(text);
    const called = PG_FUNCTIONS.exec(text)?.[0];
    count.note(called ?? text.trim().split(/\s+/)[0] ?? "", write);
    return original.apply(this, args);
  };
  return count;
}

const REDIS_READS = new Set([
  "get",
  "mget",
  "hget",
  "hmget",
  "hgetall",
  "exists",
  "lrange",
  "llen",
  "xrange",
  "xrevrange",
  "xlen",
  "scan",
  "ping",
  "info",
  "script",
  "client",
  "select",
  "cluster",
  "ttl",
  "pttl",
  "type",
  "zrange",
  "zrangebyscore",
  "smembers",
]);

/**
 * Redis (ioredis): every command a client sends; a write is any command that is not a plain
 * read, scripts included (`evalsha` counts as a write even when the script only reads: the
 * stores' read scripts are named by the caller's test when that matters). `Redis` is ioredis's
 * `Redis` class (a `Cluster` sends through its nodes' clients, so it is counted too).
 */
export function countRedisCommands(Redis: { prototype: object }): DriverCounter {
  const prototype = Redis.prototype as {
    sendCommand: (command: { name: string }, ...rest: unknown[]) => unknown;
  };
  const original = prototype.sendCommand;
  const count = counter(() => {
    prototype.sendCommand = original;
  });
  prototype.sendCommand = function sendCommand(
    this: unknown,
    command: { name: string },
    ...rest: unknown[]
  ) {
    const name = String(command?.name ?? "").toLowerCase();
    count.note(name, !REDIS_READS.has(name));
    return original.call(this, command, ...rest);
  };
  return count;
}
