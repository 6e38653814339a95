/**
 * Removing what a bench section wrote to the shared servers. Audit keys and rows never expire
 * (an audit trail is kept), so a section that leaves its prefix or schema behind grows the
 * keyspace every run, and the Redis tests' keyspace scans slow down with it.
 */
import { Redis } from "ioredis";
import pg from "pg";

/** Unlinks every key under `prefix`. */
export async function deletePrefix(redis: Redis, prefix: string): Promise<void> {
  let cursor = "0";
  do {
    const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000);
    cursor = next;
    if (keys.length > 0) await redis.unlink(...keys);
  } while (cursor !== "0");
}

/** Opens its own connection to `url` and unlinks every key under `prefix`. */
export async function deleteRedisPrefix(url: string, prefix: string): Promise<void> {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
    await deletePrefix(redis, prefix);
  } finally {
    redis.disconnect();
  }
}

/** Drops `schema` with everything in it. */
export async function dropPostgresSchema(url: string, schema: string): Promise<void> {
  const admin = new pg.Client({ connectionString: url });
  try {
    await admin.connect();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await admin.end().catch(() => undefined);
  }
}
