import { randomBytes } from "node:crypto";
import { startTcpProxy, type TcpProxy } from "@tessera/testkit";
import { Redis } from "ioredis";
import { deletePrefix } from "../../../../test/support/scratch-stores.js";
import { RedisActLedger } from "../../src/act-ledger.js";
import { parseRedisUrl } from "../../src/config.js";
import { Connection } from "../../src/connection.js";
import { openStores, type RedisStores } from "../../src/index.js";

export { deletePrefix };

/**
 * Per-test Redis stores, each under its own key prefix (`tessera_test:<pid>:<random>:`,
 * deleted at close) and connection name, reached through a private TCP proxy so an outage
 * test cuts exactly its own connections while the shared server keeps running.
 */
export interface TestStores {
  readonly stores: RedisStores;
  /** The URL a child process opens the same keys with (direct, not through the proxy). */
  readonly directUrl: string;
  readonly prefix: string;
  readonly connectionName: string;
  readonly proxy: TcpProxy;
  close(): Promise<void>;
}

/** Generous: CI machines are shared. Outages in these tests are cut by the proxy. */
const TIMEOUTS = { connectTimeoutMs: "20000", commandTimeoutMs: "20000" };

export function freshPrefix(): string {
  return `tessera_test:${process.pid}:${randomBytes(4).toString("hex")}:`;
}

export function withParams(base: string, params: Record<string, string>): string {
  const url = new URL(base);
  for (const [name, value] of Object.entries(params)) url.searchParams.set(name, value);
  return url.toString();
}

export async function openTestStores(baseUrl: string, extra: Record<string, string> = {}) {
  const prefix = freshPrefix();
  const connectionName = `tessera_test_${prefix.split(":").slice(1, 3).join("_")}`;
  const target = new URL(baseUrl);
  const proxy = await startTcpProxy(target.hostname, Number(target.port || 6379));
  const viaProxy = new URL(baseUrl);
  viaProxy.host = proxy.address;
  try {
    const stores = await openStores(
      withParams(viaProxy.toString(), { prefix, name: connectionName, ...TIMEOUTS, ...extra }),
    );
    return {
      stores,
      prefix,
      connectionName,
      proxy,
      directUrl: withParams(baseUrl, { prefix, ...TIMEOUTS, ...extra }),
      close: async () => {
        await stores.close();
        await proxy.close();
        await deletePrefix(baseUrl, prefix);
      },
    } satisfies TestStores;
  } catch (error) {
    await proxy.close();
    await deletePrefix(baseUrl, prefix);
    throw error;
  }
}

/** Runs `work` on a short-lived admin connection. */
export async function admin<T>(baseUrl: string, work: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = new Redis(baseUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  try {
    return await work(redis);
  } finally {
    redis.disconnect();
  }
}

/** `CLIENT KILL`s this test's own connections, found by their unique name. */
export async function killOwnClients(baseUrl: string, connectionName: string): Promise<number> {
  return admin(baseUrl, async (redis) => {
    const list = (await redis.client("LIST")) as string;
    const ids = list
      .split("\n")
      .filter((line) => line.includes(` name=${connectionName} `))
      .map((line) => /(?:^|\s)id=(\d+)/.exec(line)?.[1])
      .filter((id): id is string => id !== undefined);
    for (const id of ids) await redis.client("KILL", "ID", id);
    return ids.length;
  });
}

/** Retries `probe` until it answers (the client reconnecting after an outage), or gives up. */
export async function waitUntilAnswering(
  probe: () => Promise<unknown>,
  ms = 10_000,
): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      await probe();
      return;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }
}

/**
 * A connection of its own to `stores`' keys, through their proxy and under their connection
 * name (so an outage cuts it too), with a native act ledger on it. The caller closes it.
 */
export async function openOwnLedger(
  stores: TestStores,
): Promise<{ connection: Connection; ledger: RedisActLedger }> {
  const config = parseRedisUrl(
    withParams(`redis://${stores.proxy.address}`, {
      prefix: stores.prefix,
      name: stores.connectionName,
      commandTimeoutMs: "20000",
    }),
  );
  const connection = new Connection(config);
  await connection.connect("store_unavailable");
  return { connection, ledger: new RedisActLedger(connection, config.claimTtlMs) };
}
