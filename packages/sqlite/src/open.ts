import { statSync } from "node:fs";
import type {
  ClaimReader,
  ClaimStore,
  Closable as CoreClosable,
  GrantStore,
  GrantUsageStore,
  ReadableAuditSink,
  StoreBundle,
} from "@tessera/core";
import { TesseraError } from "@tessera/core";
import { storeOpeners } from "@tessera/core/store-kit";
import { SqliteActLedger } from "./act-ledger.js";
import { SqliteAuditSink } from "./audit-sink.js";
import { SqliteClaimStore } from "./claim-store.js";
import { parseSqliteUrl } from "./config.js";
import { SqliteDatabase } from "./database.js";
import { SqliteGrantStore } from "./grant-store.js";
import { checkReadable, migrate, SCHEMA_VERSION } from "./migrations.js";
import { selfTest } from "./self-test.js";
import { SqliteUsageStore } from "./usage-store.js";

/** @deprecated Use `StoreBundle` from `@tessera/core`; kept for one release. */
export type SqliteStores = StoreBundle;
/** @deprecated Use `Closable` from `@tessera/core`; kept for one release. */
export type Closable<Port> = CoreClosable<Port>;

const openers = storeOpeners<SqliteDatabase>({
  name: "SQLite",
  // Any failure here is re-coded by the opener (`store_unavailable`, `claim_store_unavailable`…).
  connect: (url, options) => {
    const config = parseSqliteUrl(url);
    if (options?.readOnly !== true) return SqliteDatabase.open(config, "store_unavailable");
    // A reader never creates the file it was asked to read, whatever `create` says.
    if (config.path !== ":memory:" && !fileIsThere(config.path)) {
      throw new TesseraError(
        "schema_unavailable",
        `no database file at ${config.path}: it holds no Tessera store`,
      );
    }
    return SqliteDatabase.open({ ...config, create: false }, "store_unavailable");
  },
  prepare(db) {
    migrate(db, "store_unavailable");
    if (db.config.selfTest) selfTest(db, new SqliteClaimStore(db), new SqliteUsageStore(db));
  },
  inspect: (db) => {
    checkReadable(db, "store_unavailable");
  },
  version: (db) => ({ store: checkReadable(db, "store_unavailable"), build: SCHEMA_VERSION }),
  disconnect: (db) => db.close(),
  usage: (db) => new SqliteUsageStore(db),
  grants: (db) => new SqliteGrantStore(db),
  audit: (db) => new SqliteAuditSink(db),
  claims: (db, release) => new SqliteClaimStore(db, release),
  acts: (db) => new SqliteActLedger(db),
});

/**
 * Whether the file is there, told apart from whether this user may reach it: `existsSync` says
 * false for both, so a file in a directory the user may not search read as "no database file",
 * `schema_unavailable`. Only a path that is not there is false; any other failure (EACCES)
 * is thrown, and the opener reports it as the store it could not open, with its code.
 */
function fileIsThere(path: string): boolean {
  try {
    statSync(path);
    return true;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return false;
    throw error;
  }
}

/**
 * Opens the stores in the SQLite file named by `sqlite:./tessera.db` (created if absent),
 * in WAL mode with `synchronous=FULL` unless the URL says `?synchronous=normal`. Migrates
 * (idempotent; safe when several processes open at once), then self-tests; a file or
 * driver that cannot prove its primitives is closed and refused with
 * `store_self_test_failed`. A file that cannot be opened: `store_unavailable`.
 */
export async function openStores(url: string): Promise<StoreBundle> {
  return openers.openStores(url);
}

/** The claim store alone (for the A2UI gate); its `close()` closes its connection. */
export async function openClaimStore(url: string): Promise<ClaimStore> {
  return openers.openClaimStore(url);
}

export async function openUsageStore(url: string): Promise<CoreClosable<GrantUsageStore>> {
  return openers.openUsageStore(url);
}

export async function openGrantStore(url: string): Promise<CoreClosable<GrantStore>> {
  return openers.openGrantStore(url);
}

export async function openAuditSink(url: string): Promise<CoreClosable<ReadableAuditSink>> {
  return openers.openAuditSink(url);
}

/**
 * The audit trail to read, writing nothing: no migration, no self-test, and a file that is not
 * there is an error rather than created. A WAL database's readers share its `-shm` index:
 * a user who may only read the file reads it while that index is there (the service has it
 * open), but cannot create one for a store closed cleanly in a directory it may not write
 * (`audit_unavailable`, naming SQLITE_READONLY_DIRECTORY; docs/operations.md).
 * A file that holds no store, or one newer than this build, is `schema_unavailable`.
 */
export async function openAuditReader(url: string): Promise<CoreClosable<ReadableAuditSink>> {
  return openers.openAuditReader(url);
}

/**
 * The claims to list, writing nothing, opened as `openAuditReader` opens the trail. A file at
 * an older schema version than this build is `schema_unavailable` and left as it is: listing
 * its claims would need it migrated, which only a writer's open (`openStores`) does.
 */
export async function openClaimReader(url: string): Promise<ClaimReader> {
  return openers.openClaimReader(url);
}
