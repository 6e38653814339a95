import { Redis } from "ioredis";
import pg from "pg";

/**
 * Removes what a test left in a shared PostgreSQL or Redis: its schema, or every key under its
 * prefix. The one implementation for every suite that runs over a store of its own: the
 * PostgreSQL and Redis packages' tests (`tessera_test_…` schemas, `tessera_test:…:` prefixes)
 * and the process tests of the server, the MCP gateway and the CLI demo, whose run names
 * (`serve_…`, `mcp_…`, `cli_…`) serve as both. Any other name is refused; a failure throws.
 */
const RUN = "(serve|mcp|cli)_[0-9a-f]{12}";
const TEST_SCHEMA = new RegExp(`^(tessera_test_\\w+|${RUN})$`);
const TEST_PREFIX = new RegExp(`^(tessera_test:[\\w:]+|${RUN}):$`);

/** `DROP SCHEMA "<schema>" CASCADE` on a short-lived connection. */
export async function dropSchema(baseUrl: string, schema: string): Promise<void> {
  if (!TEST_SCHEMA.test(schema)) throw new Error(`refusing to drop a non-test schema: ${schema}`);
  const client = new pg.Client({ connectionString: baseUrl });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
}

/** SCAN MATCH `<prefix>*` + UNLINK on a short-lived connection (SCAN is fine here: tests only). */
export async function deletePrefix(baseUrl: string, prefix: string): Promise<void> {
  if (!TEST_PREFIX.test(prefix)) throw new Error(`refusing to delete a non-test prefix: ${prefix}`);
  const redis = new Redis(baseUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  try {
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000);
      cursor = next;
      if (keys.length > 0) await redis.unlink(...keys);
    } while (cursor !== "0");
  } finally {
    redis.disconnect();
  }
}

/** A process test's run, as a store URL names it: the schema `run`, or the prefix `run:`. */
export function removeRun(backend: "schema" | "prefix", baseUrl: string, run: string) {
  return backend === "schema" ? dropSchema(baseUrl, run) : deletePrefix(baseUrl, `${run}:`);
}
