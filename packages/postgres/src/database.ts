import { type ErrorCode, TesseraError } from "@tessera/core";
import pg from "pg";
import type { PostgresConfig } from "./config.js";

/** The code a failed statement is reported under: each port has its own `*_unavailable`. */
export type UnavailableCode = Extract<ErrorCode, `${string}_unavailable`>;

/**
 * One pool shared by every port of an `openStores` bundle. Every statement goes through
 * `query`, which takes parameters only (never spliced text) and turns any failure into a
 * `TesseraError` with the caller's `*_unavailable` code: a store that cannot answer makes the
 * kernel and the gate fail closed, and never leaks the server's message (which may quote a
 * key) into the error text.
 */
export class Database {
  readonly #pool: pg.Pool;
  readonly schema: string;
  /**
   * The identity of this database's grant versions (`GrantSource.versionSpace`): the grant
   * store hands it out and the act ledger checks against it, both over this pool.
   */
  readonly versionSpace: object = Object.freeze({});
  #closed = false;

  /** `readOnly`: every transaction of every connection is read-only (a reader's open). */
  constructor(config: PostgresConfig, options: { readonly readOnly?: boolean } = {}) {
    this.schema = config.schema;
    this.#pool = new pg.Pool({
      // Set at connection start-up, so no statement of a reader can write, whatever it is.
      // In the connection string, where `pg` gives an `options` of the URL precedence over
      // one passed beside it: appended to the URL's own, last, so it stands.
      connectionString:
        options.readOnly === true
          ? readOnlyConnection(config.connectionString)
          : config.connectionString,
      max: config.poolMax,
      connectionTimeoutMillis: config.connectTimeoutMs,
      idleTimeoutMillis: config.idleTimeoutMs,
      // Server side: a statement stuck behind a lock is cancelled. Client side: a server that
      // stopped answering (network cut) does not hold a caller forever.
      statement_timeout: config.statementTimeoutMs,
      query_timeout: config.statementTimeoutMs + 1_000,
      application_name: config.applicationName,
      keepAlive: true,
      // The bundle's rule on every backend (see `StoreBundle`): idle connections do not keep
      // the process alive. A client is referenced while checked out (a query in flight) and
      // unreferenced when it goes back to the pool, its idle timer too.
      allowExitOnIdle: true,
    });
    // An idle client whose backend was terminated (restart, pg_terminate_backend) reports
    // here; the pool already discards it, and the next query opens a fresh connection.
    this.#pool.on("error", () => {});
  }

  /** `"schema"."table"`: the schema name was validated as a plain identifier at parse time. */
  table(name: string): string {
    return `"${this.schema}"."${name}"`;
  }

  /**
   * One statement on any pooled connection. With `preparedAs`, the statement is prepared once
   * per connection under that name (one name per text), so the server parses and plans it once
   * instead of on every call: for the hot statements, each with its own fixed text.
   */
  async query<Row extends pg.QueryResultRow>(
    failCode: UnavailableCode,
    text: string,
    values: readonly unknown[] = [],
    preparedAs?: string,
  ): Promise<pg.QueryResult<Row>> {
    if (this.#closed) throw new TesseraError(failCode, "the PostgreSQL store is closed");
    try {
      if (preparedAs !== undefined) {
        return await this.#pool.query<Row>({ name: preparedAs, text, values: values as unknown[] });
      }
      return await this.#pool.query<Row>(text, values as unknown[]);
    } catch (error) {
      throw unavailable(failCode, error);
    }
  }

  /** Runs `work` in one transaction on one connection (migrations, multi-statement reads). */
  async transaction<T>(
    failCode: UnavailableCode,
    work: (client: pg.PoolClient) => Promise<T>,
  ): Promise<T> {
    const held = await this.#checkOut(failCode);
    const { client } = held;
    try {
      await client.query("BEGIN");
      const result = await work(client);
      await client.query("COMMIT");
      return result;
    } catch (error) {
      await held.rollback();
      if (error instanceof TesseraError) throw error;
      throw unavailable(failCode, error);
    } finally {
      held.release();
    }
  }

  /**
   * Yields what `read` yields, every statement of it on one connection in one read-only
   * REPEATABLE READ transaction: one snapshot however long the caller takes between pages.
   * Ended early by the caller, the transaction is rolled back and the connection returned.
   */
  async *snapshot<T>(
    failCode: UnavailableCode,
    read: (
      query: (text: string, values: readonly unknown[]) => Promise<pg.QueryResult>,
    ) => AsyncIterable<T>,
  ): AsyncGenerator<T> {
    const held = await this.#checkOut(failCode);
    const query = async (text: string, values: readonly unknown[]) => {
      try {
        return await held.client.query(text, values as unknown[]);
      } catch (error) {
        throw unavailable(failCode, error);
      }
    };
    try {
      await query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", []);
      yield* read(query);
    } finally {
      // Read only: ending it either way changes nothing, so it is ended the same way always.
      await held.rollback();
      held.release();
    }
  }

  /**
   * One connection of the pool, for work of several statements. A checked-out client has no
   * listener of the pool's: a backend that ends while no statement of ours is in flight (the
   * server killed or restarted between BEGIN and COMMIT: "terminating connection due to
   * unexpected postmaster exit") emits 'error' on the client, which unheard killed the whole
   * process. Heard here, the connection is dropped on release and the next statement of the
   * work fails.
   */
  async #checkOut(failCode: UnavailableCode) {
    if (this.#closed) throw new TesseraError(failCode, "the PostgreSQL store is closed");
    let broken = false;
    const lost = () => {
      broken = true;
    };
    let client: pg.PoolClient;
    try {
      // The callback form, not the promise: the listener must be on the client before the
      // driver parses the next message. A new connection's ReadyForQuery and a FATAL sent
      // right behind it (the server killed as the pool connected) arrive in one read and are
      // handled in one go; a listener added after an `await` came a microtask too late, and
      // the unheard 'error' ended the process (found by kill -9 of PostgreSQL under serve).
      client = await new Promise<pg.PoolClient>((resolve, reject) => {
        this.#pool.connect((error, connected) => {
          if (error || !connected) {
            reject(error ?? new Error("the pool handed out no connection"));
            return;
          }
          connected.on("error", lost);
          resolve(connected);
        });
      });
    } catch (error) {
      throw unavailable(failCode, error);
    }
    return {
      client,
      async rollback(): Promise<void> {
        try {
          await client.query("ROLLBACK");
        } catch {
          broken = true;
        }
      },
      release(): void {
        client.removeListener("error", lost);
        client.release(broken);
      },
    };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#pool.end();
  }
}

function unavailable(code: UnavailableCode, error: unknown): TesseraError {
  const detail =
    typeof error === "object" && error !== null && "code" in error && typeof error.code === "string"
      ? ` (${error.code})`
      : "";
  return new TesseraError(code, `PostgreSQL did not answer${detail}`, { cause: error });
}

/**
 * The connection string with `-c default_transaction_read_only=on` appended to its `options`
 * (the server applies `-c` settings in order, so the URL cannot turn it off again).
 */
function readOnlyConnection(connectionString: string): string {
  const url = new URL(connectionString);
  const given = url.searchParams.getAll("options");
  url.searchParams.set("options", [...given, "-c default_transaction_read_only=on"].join(" "));
  return url.toString();
}
