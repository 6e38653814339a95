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
import { RedisActLedger } from "./act-ledger.js";
import { RedisAuditSink } from "./audit-sink.js";
import { RedisClaimStore } from "./claim-store.js";
import { parseRedisUrl, type RedisConfig } from "./config.js";
import { Connection } from "./connection.js";
import { RedisGrantStore } from "./grant-store.js";
import { checkLayout, checkReadableLayout, LAYOUT_VERSION } from "./layout.js";
import { selfTest } from "./self-test.js";
import { RedisUsageStore } from "./usage-store.js";

/** @deprecated Use `StoreBundle` from `@tessera/core`; kept for one release. */
export type RedisStores = StoreBundle;
/** @deprecated Use `Closable` from `@tessera/core`; kept for one release. */
export type Closable<Port> = CoreClosable<Port>;

interface Connected {
  readonly connection: Connection;
  readonly config: RedisConfig;
}

const openers = storeOpeners<Connected>({
  name: "Redis",
  async connect(url, options) {
    const config = parseRedisUrl(url);
    const connection = new Connection(config, { readOnly: options?.readOnly === true });
    // Any failure is re-coded by the opener (`store_unavailable`, `claim_store_unavailable`…).
    await connection.connect("store_unavailable");
    return { connection, config };
  },
  async prepare({ connection, config }) {
    try {
      await connection.refuseClusterNode();
      await checkLayout(connection);
      if (config.selfTest) {
        await selfTest(
          connection,
          new RedisClaimStore(connection, config.claimTtlMs),
          new RedisUsageStore(connection),
          config.claimTtlMs,
        );
      }
    } catch (error) {
      // Said with its cause while the connection is still open (a cluster node, a refusal).
      throw await connection.explainOpenFailure(error);
    }
  },
  async inspect({ connection }) {
    try {
      await connection.refuseClusterNode();
      await checkReadableLayout(connection);
    } catch (error) {
      throw await connection.explainOpenFailure(error);
    }
  },
  async version({ connection }) {
    try {
      return { store: await checkReadableLayout(connection), build: LAYOUT_VERSION };
    } catch (error) {
      throw await connection.explainOpenFailure(error);
    }
  },
  disconnect: ({ connection }) => connection.close(),
  usage: ({ connection }) => new RedisUsageStore(connection),
  grants: ({ connection }) => new RedisGrantStore(connection),
  audit: (opened) => new RedisAuditSink(opened.connection, ledgerOf(opened)),
  claims: ({ connection, config }, release) =>
    new RedisClaimStore(connection, config.claimTtlMs, release),
  acts: (opened) => ledgerOf(opened),
});

/** One act ledger per connection, shared by the bundle's `acts` and its audit sink's appends. */
const ledgers = new WeakMap<object, RedisActLedger>();
function ledgerOf(opened: { connection: Connection; config: { claimTtlMs: number } }) {
  let ledger = ledgers.get(opened);
  if (ledger === undefined) {
    ledger = new RedisActLedger(opened.connection, opened.config.claimTtlMs);
    ledgers.set(opened, ledger);
  }
  return ledger;
}

/**
 * Opens the stores behind `redis://host:port/db?prefix=NAME`, then runs the self-test; a
 * store that cannot prove its primitives is closed again and refused with
 * `store_self_test_failed`. A server that cannot be reached is `store_unavailable`.
 *
 * URL options (query string): `prefix` (default `tessera:`), `claimTtlMs` (7 days: must
 * cover the longest host session), `connectTimeoutMs` (5000), `commandTimeoutMs` (5000),
 * `name` (connection name, `tessera`), `selfTest` (`true`).
 */
export async function openStores(url: string): Promise<StoreBundle> {
  return openers.openStores(url);
}

/** The claim store alone (for the A2UI gate); its `close()` ends its connection. */
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
 * The audit trail to read, writing nothing: no layout migration, no self-test. An ACL user
 * with read commands on the prefix's keys serves it (docs/stores.md, "Reading the trail").
 * A prefix that holds no store, or one newer than this build, is `schema_unavailable`; an
 * older one is read as it is.
 */
export async function openAuditReader(url: string): Promise<CoreClosable<ReadableAuditSink>> {
  return openers.openAuditReader(url);
}

/**
 * The claims to list, writing nothing: no layout migration, no self-test, read commands only
 * (GET, SCAN). A prefix at an older layout version than this build is `schema_unavailable`
 * and left as it is: listing its claims would need it migrated, which only a writer's open
 * (`openStores`) does.
 */
export async function openClaimReader(url: string): Promise<ClaimReader> {
  return openers.openClaimReader(url);
}
