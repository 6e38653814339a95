import { randomBytes } from "node:crypto";
import type { ErrorCode } from "@tessera/core";
import { startTcpProxy, type TcpProxy } from "@tessera/testkit";
import pg from "pg";
import { afterEach, vi } from "vitest";
import { dropSchema } from "../../../../test/support/scratch-stores.js";
import { openStores, type PostgresStores } from "../../src/index.js";

export { dropSchema };

/**
 * Per-test PostgreSQL stores, each in its own schema (`tessera_test_<pid>_<random>`, dropped
 * at close) so parallel runs never collide, reached through a private TCP proxy so an outage
 * test can cut exactly its own connections.
 */
export interface TestStores {
  readonly stores: PostgresStores;
  /** The URL a child process opens the same schema with (direct, not through the proxy). */
  readonly directUrl: string;
  readonly schema: string;
  readonly applicationName: string;
  readonly proxy: TcpProxy;
  close(): Promise<void>;
}

export function freshSchema(): string {
  return `tessera_test_${process.pid}_${randomBytes(4).toString("hex")}`;
}

export function withParams(base: string, params: Record<string, string>): string {
  const url = new URL(base);
  for (const [name, value] of Object.entries(params)) url.searchParams.set(name, value);
  return url.toString();
}

/** `overrides` replace the URL options below (a short `statementTimeoutMs` for a fault test). */
export async function openTestStores(
  baseUrl: string,
  overrides: Record<string, string> = {},
): Promise<TestStores> {
  const schema = freshSchema();
  const applicationName = `tessera_${schema}`.slice(0, 63);
  const target = new URL(baseUrl);
  const proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
  const viaProxy = new URL(baseUrl);
  viaProxy.host = proxy.address;
  // Generous timeouts: CI machines are shared, and a pool wait counts against the connect
  // timeout. Outages in these tests are cut by the proxy, not left to time out.
  const params = {
    schema,
    application_name: applicationName,
    connectTimeoutMs: "20000",
    statementTimeoutMs: "30000",
    ...overrides,
  };
  try {
    const stores = await openStores(withParams(viaProxy.toString(), params));
    return {
      stores,
      schema,
      applicationName,
      proxy,
      directUrl: withParams(baseUrl, {
        schema,
        connectTimeoutMs: "20000",
        statementTimeoutMs: "30000",
      }),
      close: async () => {
        await stores.close();
        await proxy.close();
        await dropSchema(baseUrl, schema);
      },
    };
  } catch (error) {
    await proxy.close();
    await dropSchema(baseUrl, schema);
    throw error;
  }
}

/** Runs `sql` on a short-lived admin connection (schema drops, pg_terminate_backend). */
export async function admin<T extends pg.QueryResultRow>(
  baseUrl: string,
  sql: string,
  values: unknown[] = [],
): Promise<T[]> {
  const client = new pg.Client({ connectionString: baseUrl });
  await client.connect();
  try {
    return (await client.query<T>(sql, values)).rows;
  } finally {
    await client.end();
  }
}

/** Terminates this test's own server sessions, found by their unique application_name. */
export async function terminateOwnBackends(
  baseUrl: string,
  applicationName: string,
): Promise<number> {
  const rows = await admin<{ pid: number }>(
    baseUrl,
    `SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()`,
    [applicationName],
  );
  await admin(baseUrl, "SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid", [
    rows.map((row) => row.pid),
  ]);
  return rows.length;
}

/** Retries `probe` until it answers (the pool reconnecting after an outage), or gives up. */
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
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

export function codeOf(error: unknown): ErrorCode | undefined {
  return typeof error === "object" && error !== null && "code" in error
    ? (error.code as ErrorCode)
    : undefined;
}

/**
 * Stores opened by a test and closed after it, mocks restored: registers the `afterEach` and
 * returns the opener. Call it once at the top of a test file.
 */
export function storesPerTest(
  baseUrl: string | undefined,
): (overrides?: Record<string, string>) => Promise<TestStores> {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    vi.restoreAllMocks();
    for (const cleanup of cleanups.splice(0)) await cleanup();
  });
  return async (overrides) => {
    const stores = await openTestStores(baseUrl as string, overrides);
    cleanups.push(() => stores.close());
    return stores;
  };
}
