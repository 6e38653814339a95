import {
  type ClaimStore,
  type GrantStore,
  type GrantUsageStore,
  isTesseraError,
  type ReadableAuditSink,
  TesseraError,
} from "@tessera/core";
import { RedisAuditSink } from "./audit-sink.js";
import { RedisClaimStore } from "./claim-store.js";
import { parseRedisUrl, type RedisConfig } from "./config.js";
import { Connection, type UnavailableCode } from "./connection.js";
import { RedisGrantStore } from "./grant-store.js";
import { checkLayout } from "./layout.js";
import { selfTest } from "./self-test.js";
import { RedisUsageStore } from "./usage-store.js";

/** Every port this backend serves, over one connection. */
export interface RedisStores {
  readonly usage: GrantUsageStore;
  readonly claims: ClaimStore;
  readonly grants: GrantStore;
  readonly audit: ReadableAuditSink;
  /** Closes the connection; every port refuses afterwards with its `*_unavailable` code. */
  close(): Promise<void>;
}

/** A single port that owns its connection: `close()` ends it. */
export type Closable<Port> = Port & { close(): Promise<void> };

/**
 * Opens the stores behind `redis://host:port/db?prefix=NAME`, then runs the self-test; a
 * store that cannot prove its primitives is closed again and refused with
 * `store_self_test_failed`.
 *
 * URL options (query string): `prefix` (default `tessera:`), `claimTtlMs` (7 days: must
 * cover the longest host session), `connectTimeoutMs` (5000), `commandTimeoutMs` (5000),
 * `name` (connection name, `tessera`), `selfTest` (`true`).
 */
export async function openStores(url: string): Promise<RedisStores> {
  const { connection, config } = await openConnection(url, "store_unavailable");
  const close = () => connection.close();
  return Object.freeze({
    usage: new RedisUsageStore(connection),
    claims: new RedisClaimStore(connection, config.claimTtlMs, close),
    grants: new RedisGrantStore(connection),
    audit: new RedisAuditSink(connection),
    close,
  });
}

/** The claim store alone (for the A2UI gate); its `close()` ends its connection. */
export async function openClaimStore(url: string): Promise<ClaimStore> {
  const { connection, config } = await openConnection(url, "claim_store_unavailable");
  return new RedisClaimStore(connection, config.claimTtlMs, () => connection.close());
}

export async function openUsageStore(url: string): Promise<Closable<GrantUsageStore>> {
  const { connection } = await openConnection(url, "usage_store_unavailable");
  return withClose(new RedisUsageStore(connection), connection);
}

export async function openGrantStore(url: string): Promise<Closable<GrantStore>> {
  const { connection } = await openConnection(url, "grant_store_unavailable");
  return withClose(new RedisGrantStore(connection), connection);
}

export async function openAuditSink(url: string): Promise<Closable<ReadableAuditSink>> {
  const { connection } = await openConnection(url, "audit_unavailable");
  return withClose(new RedisAuditSink(connection), connection);
}

async function openConnection(
  url: string,
  failCode: UnavailableCode,
): Promise<{ connection: Connection; config: RedisConfig }> {
  const config = parseRedisUrl(url);
  const connection = new Connection(config);
  await connection.connect(failCode);
  try {
    await checkLayout(connection);
    if (config.selfTest) {
      await selfTest(
        connection,
        new RedisClaimStore(connection, config.claimTtlMs),
        new RedisUsageStore(connection),
        config.claimTtlMs,
      );
    }
    return { connection, config };
  } catch (error) {
    await connection.close();
    if (
      isTesseraError(error, "store_self_test_failed") ||
      isTesseraError(error, "schema_unavailable")
    ) {
      throw error;
    }
    throw new TesseraError(failCode, "could not open the Redis store", { cause: error });
  }
}

function withClose<Port extends object>(port: Port, connection: Connection): Closable<Port> {
  return Object.assign(port, { close: () => connection.close() });
}
