import {
  type ClaimStore,
  type GrantStore,
  type GrantUsageStore,
  isTesseraError,
  type ReadableAuditSink,
  TesseraError,
} from "@tessera/core";
import { PostgresAuditSink } from "./audit-sink.js";
import { PostgresClaimStore } from "./claim-store.js";
import { parsePostgresUrl } from "./config.js";
import { Database } from "./database.js";
import { PostgresGrantStore } from "./grant-store.js";
import { migrate } from "./migrations.js";
import { selfTest } from "./self-test.js";
import { PostgresUsageStore } from "./usage-store.js";

/** Every port this backend serves, over one connection pool. */
export interface PostgresStores {
  readonly usage: GrantUsageStore;
  readonly claims: ClaimStore;
  readonly grants: GrantStore;
  readonly audit: ReadableAuditSink;
  /** Ends the pool; every port refuses afterwards with its `*_unavailable` code. */
  close(): Promise<void>;
}

/** A single port that owns its pool: `close()` ends it. */
export type Closable<Port> = Port & { close(): Promise<void> };

/**
 * Opens the stores behind `postgres://user@host:port/db?schema=NAME`. Migrates the schema
 * (idempotent, safe when several processes open at once), then runs the self-test; a store
 * that cannot prove its primitives is closed again and refused with `store_self_test_failed`.
 *
 * URL options (query string): `schema` (default `tessera`), `poolMax` (10),
 * `connectTimeoutMs` (5000), `statementTimeoutMs` (5000), `idleTimeoutMs` (10000),
 * `application_name` (`tessera`), `selfTest` (`true`).
 */
export async function openStores(url: string): Promise<PostgresStores> {
  const db = await openDatabase(url, "store_unavailable");
  const close = () => db.close();
  return Object.freeze({
    usage: new PostgresUsageStore(db),
    claims: new PostgresClaimStore(db, close),
    grants: new PostgresGrantStore(db),
    audit: new PostgresAuditSink(db),
    close,
  });
}

/** The claim store alone (for the A2UI gate); its `close()` ends its pool. */
export async function openClaimStore(url: string): Promise<ClaimStore> {
  const db = await openDatabase(url, "claim_store_unavailable");
  return new PostgresClaimStore(db, () => db.close());
}

export async function openUsageStore(url: string): Promise<Closable<GrantUsageStore>> {
  const db = await openDatabase(url, "usage_store_unavailable");
  return withClose(new PostgresUsageStore(db), db);
}

export async function openGrantStore(url: string): Promise<Closable<GrantStore>> {
  const db = await openDatabase(url, "grant_store_unavailable");
  return withClose(new PostgresGrantStore(db), db);
}

export async function openAuditSink(url: string): Promise<Closable<ReadableAuditSink>> {
  const db = await openDatabase(url, "audit_unavailable");
  return withClose(new PostgresAuditSink(db), db);
}

/**
 * Connects, migrates and self-tests. A server that cannot be reached is reported under the
 * code of what was being opened (`store_unavailable` for the bundle); a refused self-test or
 * a too-new schema keeps its own code.
 */
async function openDatabase(url: string, failCode: OpenFailCode): Promise<Database> {
  const config = parsePostgresUrl(url);
  const db = new Database(config);
  try {
    await migrate(db);
    if (config.selfTest) {
      await selfTest(db, new PostgresClaimStore(db), new PostgresUsageStore(db));
    }
    return db;
  } catch (error) {
    await db.close();
    if (isTesseraError(error) && !error.code.endsWith("_unavailable")) throw error;
    if (isTesseraError(error, "schema_unavailable")) throw error;
    throw new TesseraError(failCode, "could not open the PostgreSQL store", { cause: error });
  }
}

type OpenFailCode =
  | "store_unavailable"
  | "claim_store_unavailable"
  | "usage_store_unavailable"
  | "grant_store_unavailable"
  | "audit_unavailable";

function withClose<Port extends object>(port: Port, db: Database): Closable<Port> {
  return Object.assign(port, { close: () => db.close() });
}
