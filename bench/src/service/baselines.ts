/**
 * What the service rows are measured against, all served from this process like the service:
 * a bare Fastify route, and the same route performing exactly one raw single write of a claim
 * row (the store's primitive, same file settings or same server) per request. Beside them, the
 * raw write called in-process with no HTTP at all, kept as information.
 */
import { randomUUID } from "node:crypto";
import { closeSync, fsync, openSync } from "node:fs";
import type { AddressInfo } from "node:net";
import Database from "better-sqlite3";
import Fastify, { type FastifyInstance } from "fastify";
import pg from "pg";
import { RAW_SESSION_DIGEST, rawDigest, rawRecordJson } from "../stores/raw-claim.js";

export interface Running {
  readonly url: string;
  close(): Promise<void>;
}

/** One committed claim row per call, written by the driver alone. */
export interface RawPrimitive {
  readonly name: string;
  write(i: number): unknown;
  close(): Promise<void>;
}

const RECORD = { bodyHash: "b".repeat(64), claimedAt: Date.now() };

/** The store's file settings: WAL, synchronous=FULL (its default), the same busy timeout. */
export function rawSqlite(path: string): RawPrimitive {
  const db = new Database(path);
  db.pragma("busy_timeout = 5000");
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = FULL");
  db.exec(`CREATE TABLE IF NOT EXISTS raw_claims (
    session TEXT NOT NULL, call_id TEXT NOT NULL, record TEXT NOT NULL,
    claimed_at INTEGER NOT NULL, PRIMARY KEY (session, call_id)) WITHOUT ROWID`);
  const insert = db.prepare(
    "INSERT OR IGNORE INTO raw_claims (session, call_id, record, claimed_at) VALUES (?, ?, ?, ?)",
  );
  return {
    name: "INSERT OR IGNORE of one claim row (synchronous=FULL)",
    write: (i) =>
      insert.run(RAW_SESSION_DIGEST, rawDigest("s", i), rawRecordJson("s", i, RECORD), i),
    close: async () => {
      db.close();
    },
  };
}

/**
 * One use spent from one shared counter row per call (`used < max`, committed at
 * synchronous=FULL): what every allowed send of the bench does to its one ticket. Every
 * call's commit waits for the one before it on that row, whatever the concurrency.
 */
export function rawSqliteCounter(path: string): RawPrimitive {
  const db = new Database(path);
  db.pragma("busy_timeout = 5000");
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = FULL");
  db.exec("CREATE TABLE IF NOT EXISTS raw_counter (key TEXT PRIMARY KEY, used INTEGER NOT NULL)");
  db.exec("INSERT OR IGNORE INTO raw_counter (key, used) VALUES ('ticket', 0)");
  const spend = db.prepare(
    "UPDATE raw_counter SET used = used + 1 WHERE key = 'ticket' AND used < 9007199254740991",
  );
  return {
    name: "UPDATE … WHERE used < max of one shared counter row (synchronous=FULL)",
    write: () => spend.run(),
    close: async () => {
      db.close();
    },
  };
}

/** The same on PostgreSQL, in a table of its own in the store's schema, over a pool of `poolMax`. */
export function rawPostgresCounter(base: string, schema: string, poolMax: number): RawPrimitive {
  const pool = new pg.Pool({ connectionString: base, max: poolMax });
  const table = `"${schema}".raw_counter`;
  const ready = pool
    .query(`CREATE TABLE IF NOT EXISTS ${table} (key text PRIMARY KEY, used bigint NOT NULL)`)
    .then(() => pool.query(`INSERT INTO ${table} VALUES ('ticket', 0) ON CONFLICT DO NOTHING`));
  return {
    name: "UPDATE … WHERE used < max of one shared counter row",
    write: async () => {
      await ready;
      return pool.query(
        `UPDATE ${table} SET used = used + 1 WHERE key = 'ticket' AND used < 9007199254740991`,
      );
    },
    close: () => pool.end(),
  };
}

/** Into the store's own claims table, over a pool as large as the store's (`poolMax` 10). */
export function rawPostgres(base: string, schema: string, poolMax: number): RawPrimitive {
  const pool = new pg.Pool({ connectionString: base, max: poolMax });
  return {
    name: "INSERT … ON CONFLICT DO NOTHING RETURNING of one claim row",
    write: (i) =>
      pool.query(
        `INSERT INTO "${schema}".claims (key, session_key, record, claimed_at) VALUES ($1, $2, $3, $4)
          ON CONFLICT DO NOTHING RETURNING key`,
        [rawDigest("p", i), RAW_SESSION_DIGEST, rawRecordJson("p", i, RECORD), RECORD.claimedAt],
      ),
    close: () => pool.end(),
  };
}

/** A JSON answer of `size` bytes, built once. */
function answerOf(status: string, size: number): { status: string; pad: string } {
  const bare = JSON.stringify({ status, pad: "" }).length;
  return { status, pad: "x".repeat(Math.max(0, size - bare)) };
}

async function serve(app: FastifyInstance, close: () => Promise<void>): Promise<Running> {
  await app.listen({ host: "127.0.0.1", port: 0 });
  const { port } = app.server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      await app.close();
      await close();
    },
  };
}

/** A bare Fastify route: parses the JSON body, answers `size` bytes of JSON. */
export function bareRoute(size: number): Promise<Running> {
  const app = Fastify({ logger: false });
  const answer = answerOf("denied", size);
  app.post("/v1/messages", async () => answer);
  return serve(app, async () => undefined);
}

/**
 * Keys of the raw-write routes, one sequence for all of them and offset from the in-process
 * rows' keys: no two writes ever name the same row (a second `INSERT OR IGNORE` of a row would
 * write nothing).
 */
let routeKey = 1 << 29;

/**
 * The same bare route performing the raw single write `writes` times in turn per request
 * before it answers (`size` bytes, as the service's answer): HTTP, parsing and connections as
 * the service's, so the ratio counts the durable writes and the work around them. Twice is
 * the service issue's model of a decision at its cheapest ("about two durable writes").
 */
export function rawWriteRoute(primitive: RawPrimitive, size: number, writes = 1): Promise<Running> {
  const app = Fastify({ logger: false });
  const answer = answerOf("delivered", size);
  app.post("/v1/messages", async () => {
    for (let n = 0; n < writes; n++) await primitive.write(routeKey++);
    return answer;
  });
  return serve(app, () => primitive.close());
}

/**
 * The cheapest durable record this bench knows: one audit-sized row per call (random call
 * and trace IDs, both indexed, as the audit table), the rows of every call made in one turn
 * of the event loop inserted in one BEGIN IMMEDIATE … COMMIT at synchronous=NORMAL, then the
 * WAL file fsynced on the thread pool before any of them is answered: as durable as the
 * store's synchronous=FULL commit, with the fsync off the event loop (a commit at FULL on the
 * loop measured well below this in the same place). No chain, no heads, no validation.
 */
export class DurableRows {
  readonly #db: Database.Database;
  readonly #wal: number;
  readonly #insert: Database.Statement;
  readonly #begin: Database.Statement;
  readonly #commit: Database.Statement;
  readonly #event = JSON.stringify({ reason: "no_matching_grant", pad: "e".repeat(300) });
  #waiting: { resolve: () => void; reject: (error: unknown) => void }[] = [];

  constructor(path: string) {
    this.#db = new Database(path);
    this.#db.pragma("busy_timeout = 5000");
    this.#db.pragma("journal_mode = WAL");
    this.#db.pragma("synchronous = NORMAL");
    this.#db.exec(`CREATE TABLE IF NOT EXISTS raw_audit (
      seq INTEGER PRIMARY KEY, call_id TEXT NOT NULL, trace_id TEXT NOT NULL, event TEXT NOT NULL);
      CREATE INDEX IF NOT EXISTS raw_audit_call ON raw_audit (call_id);
      CREATE INDEX IF NOT EXISTS raw_audit_trace ON raw_audit (trace_id)`);
    this.#insert = this.#db.prepare(
      "INSERT INTO raw_audit (call_id, trace_id, event) VALUES (?, ?, ?)",
    );
    this.#begin = this.#db.prepare("BEGIN IMMEDIATE");
    this.#commit = this.#db.prepare("COMMIT");
    // The WAL exists from the first commit on; an fsync through any descriptor flushes the file.
    this.#insert.run("genesis", "genesis", this.#event);
    this.#wal = openSync(`${path}-wal`, "r");
  }

  /** Resolves once this call's row is committed and on disk. */
  write(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (this.#waiting.push({ resolve, reject }) === 1) setImmediate(this.#flush);
    });
  }

  readonly #flush = () => {
    const batch = this.#waiting;
    this.#waiting = [];
    try {
      this.#begin.run();
      for (let n = 0; n < batch.length; n++) {
        this.#insert.run(randomUUID(), randomUUID(), this.#event);
      }
      this.#commit.run();
    } catch (error) {
      if (this.#db.inTransaction) this.#db.exec("ROLLBACK");
      for (const pending of batch) pending.reject(error);
      return;
    }
    fsync(this.#wal, (error) => {
      for (const pending of batch) {
        if (error) pending.reject(error);
        else pending.resolve();
      }
    });
  };

  close(): void {
    closeSync(this.#wal);
    this.#db.close();
  }
}

/**
 * The least a durable denial costs behind the bare route: one `DurableRows` row per request
 * before it answers. No kernel, no token: a service that records its denial durably before
 * answering pays at least this.
 */
export function durableRowRoute(path: string, size: number): Promise<Running> {
  const rows = new DurableRows(path);
  const app = Fastify({ logger: false });
  const answer = answerOf("denied", size);
  app.post("/v1/messages", async () => {
    await rows.write();
    return answer;
  });
  return serve(app, async () => rows.close());
}
