import { Redis } from "ioredis";
import pg from "pg";

/**
 * Removes what a test run left in a shared PostgreSQL or Redis: the run's schema, or every key
 * under the run's prefix. Shared by the packages whose process tests run over a store of their
 * own per run (`@tessera/server`'s `serve_…`, `@tessera/mcp`'s `mcp_…`, the CLI demo's `cli_…`).
 * Only names of the form `<serve|mcp|cli>_<12 hex>` are touched. A failure throws.
 */
const RUN = /^(serve|mcp|cli)_[0-9a-f]{12}$/;

function checked(run: string): string {
  if (!RUN.test(run)) throw new Error(`refusing to remove a non-test run: ${run}`);
  return run;
}

/** `DROP SCHEMA "<run>" CASCADE` on a short-lived connection. */
export async function dropSchema(baseUrl: string, run: string): Promise<void> {
  const client = new pg.Client({ connectionString: baseUrl });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${checked(run)}" CASCADE`);
  } finally {
    await client.end();
  }
}

/** SCAN MATCH `<run>:*` + UNLINK on a short-lived connection (SCAN is fine here: tests only). */
export async function deletePrefix(baseUrl: string, run: string): Promise<void> {
  const pattern = `${checked(run)}:*`;
  const redis = new Redis(baseUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  try {
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", pattern, "COUNT", 1000);
      cursor = next;
      if (keys.length > 0) await redis.unlink(...keys);
    } while (cursor !== "0");
  } finally {
    redis.disconnect();
  }
}
