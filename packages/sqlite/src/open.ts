import type { ClaimStore, GrantStore, GrantUsageStore, ReadableAuditSink } from "@tessera/core";
import { SqliteAuditSink } from "./audit-sink.js";
import { SqliteClaimStore } from "./claim-store.js";
import { parseSqliteUrl } from "./config.js";
import { SqliteDatabase, type UnavailableCode } from "./database.js";
import { SqliteGrantStore } from "./grant-store.js";
import { migrate } from "./migrations.js";
import { selfTest } from "./self-test.js";
import { SqliteUsageStore } from "./usage-store.js";

/** Every port this backend serves, over one connection. */
export interface SqliteStores {
  readonly usage: GrantUsageStore;
  readonly claims: ClaimStore;
  readonly grants: GrantStore;
  readonly audit: ReadableAuditSink;
  /** Closes the connection; every port refuses afterwards with its `*_unavailable` code. */
  close(): Promise<void>;
}

/** A single port that owns its connection: `close()` closes it. */
export type Closable<Port> = Port & { close(): Promise<void> };

/**
 * Opens the stores in the SQLite file named by `sqlite:./tessera.db` (created if absent),
 * in WAL mode with `synchronous=FULL` unless the URL says `?synchronous=normal`. Migrates
 * (idempotent; safe when several processes open at once), then self-tests; a file or
 * driver that cannot prove its primitives is closed and refused with
 * `store_self_test_failed`. A file that cannot be opened: `store_unavailable`.
 */
export async function openStores(url: string): Promise<SqliteStores> {
  const db = openDatabase(url, "store_unavailable");
  const close = async () => db.close();
  return Object.freeze({
    usage: new SqliteUsageStore(db),
    claims: new SqliteClaimStore(db),
    grants: new SqliteGrantStore(db),
    audit: new SqliteAuditSink(db),
    close,
  });
}

/** The claim store alone (for the A2UI gate); its `close()` closes its connection. */
export async function openClaimStore(url: string): Promise<ClaimStore> {
  const db = openDatabase(url, "claim_store_unavailable");
  return new SqliteClaimStore(db, () => db.close());
}

export async function openUsageStore(url: string): Promise<Closable<GrantUsageStore>> {
  const db = openDatabase(url, "usage_store_unavailable");
  return withClose(new SqliteUsageStore(db), db);
}

export async function openGrantStore(url: string): Promise<Closable<GrantStore>> {
  const db = openDatabase(url, "grant_store_unavailable");
  return withClose(new SqliteGrantStore(db), db);
}

export async function openAuditSink(url: string): Promise<Closable<ReadableAuditSink>> {
  const db = openDatabase(url, "audit_unavailable");
  return withClose(new SqliteAuditSink(db), db);
}

function openDatabase(url: string, failCode: UnavailableCode): SqliteDatabase {
  const config = parseSqliteUrl(url);
  const db = SqliteDatabase.open(config, failCode);
  try {
    migrate(db, failCode);
    if (config.selfTest) selfTest(db, new SqliteClaimStore(db), new SqliteUsageStore(db));
    return db;
  } catch (error) {
    db.close();
    throw error;
  }
}

function withClose<Port extends object>(port: Port, db: SqliteDatabase): Closable<Port> {
  return Object.assign(port, { close: async () => db.close() });
}
