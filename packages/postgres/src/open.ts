import type {
  ClaimReader,
  ClaimStore,
  Closable as CoreClosable,
  GrantStore,
  GrantUsageStore,
  ReadableAuditSink,
  StoreBundle,
} from "@tessera/core";
import { storeOpeners } from "@tessera/core/store-kit";
import { PostgresActLedger } from "./act-ledger.js";
import { PostgresAuditSink } from "./audit-sink.js";
import { PostgresClaimStore } from "./claim-store.js";
import { type PostgresConfig, parsePostgresUrl } from "./config.js";
import { Database } from "./database.js";
import { PostgresGrantStore } from "./grant-store.js";
import { checkReadable, migrate, SCHEMA_VERSION } from "./migrations.js";
import { selfTest } from "./self-test.js";
import { PostgresUsageStore } from "./usage-store.js";

/** @deprecated Use `StoreBundle` from `@tessera/core`; kept for one release. */
export type PostgresStores = StoreBundle;
/** @deprecated Use `Closable` from `@tessera/core`; kept for one release. */
export type Closable<Port> = CoreClosable<Port>;

interface Connected {
  readonly db: Database;
  readonly config: PostgresConfig;
}

const openers = storeOpeners<Connected>({
  name: "PostgreSQL",
  connect(url, options) {
    const config = parsePostgresUrl(url);
    return { db: new Database(config, options), config };
  },
  async prepare({ db, config }) {
    await migrate(db);
    if (config.selfTest) {
      await selfTest(db, new PostgresClaimStore(db), new PostgresUsageStore(db));
    }
  },
  async inspect({ db }) {
    await checkReadable(db);
  },
  version: async ({ db }) => ({ store: await checkReadable(db), build: SCHEMA_VERSION }),
  disconnect: ({ db }) => db.close(),
  usage: ({ db }) => new PostgresUsageStore(db),
  grants: ({ db }) => new PostgresGrantStore(db),
  audit: ({ db }) => new PostgresAuditSink(db),
  claims: ({ db }, release) => new PostgresClaimStore(db, release),
  // One statement per batch of acts: claim, spend, linked event and a denial's settle.
  acts: ({ db }) => new PostgresActLedger(db),
});

/**
 * Opens the stores behind `postgres://user@host:port/db?schema=NAME`. Migrates the schema
 * (idempotent, safe when several processes open at once), then runs the self-test; a store
 * that cannot prove its primitives is closed again and refused with `store_self_test_failed`.
 * A server that cannot be reached is `store_unavailable`.
 *
 * URL options (query string): `schema` (default `tessera`), `poolMax` (10),
 * `connectTimeoutMs` (5000), `statementTimeoutMs` (5000), `idleTimeoutMs` (10000),
 * `application_name` (`tessera`), `selfTest` (`true`).
 */
export async function openStores(url: string): Promise<StoreBundle> {
  return openers.openStores(url);
}

/** The claim store alone (for the A2UI gate); its `close()` ends its pool. */
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
 * The audit trail to read, writing nothing: no migration, no self-test, every transaction
 * read-only. Needs only `USAGE` on the schema and `SELECT` on its tables, so an auditor's
 * role, or a hot standby, serves it. A schema that is not there, or newer than this build,
 * is `schema_unavailable`; an older one is read as it is.
 */
export async function openAuditReader(url: string): Promise<CoreClosable<ReadableAuditSink>> {
  return openers.openAuditReader(url);
}

/**
 * The claims to list, writing nothing: every transaction read-only, as `openAuditReader`'s, so
 * a role with `SELECT` on the claims table (or a hot standby) serves it. A schema at an older
 * version than this build is `schema_unavailable` and left as it is: listing its claims would
 * need it migrated, which only a writer's open (`openStores`) does.
 */
export async function openClaimReader(url: string): Promise<ClaimReader> {
  return openers.openClaimReader(url);
}
