import { randomUUID } from "node:crypto";
import { storageDigest, TesseraError } from "@tessera/core";
import type { Redis } from "ioredis";
import { readStoredClaim } from "./claim-store.js";
import { type Connection, scanKeys } from "./connection.js";

/**
 * The version of the key layout (docs/stores.md, "Redis"), kept under `<prefix>layout-version`.
 * Redis has no schema, but the layout is one: a prefix written by a newer Tessera is refused
 * rather than half understood, and an older one is migrated here before anything is served.
 * Written with SET NX, so processes opening a fresh prefix at once agree on one value.
 *
 * - 1: `claim:<sha256(session, id)>`, with a `session:<sha256(session)>` set and an
 *   `in-doubt` set beside every claim.
 * - 2: `claim:<sha256(session)>:<sha256(id)>`, no index sets (a claim is one SET).
 */
export const LAYOUT_VERSION = 2;

/** How long a process waits for another one's migration before refusing to open. */
const MIGRATION_WAIT_MS = 30_000;

export async function checkLayout(connection: Connection): Promise<void> {
  const key = connection.key("layout-version");
  const version = await connection.run("store_unavailable", async (redis) => {
    await redis.set(key, String(LAYOUT_VERSION), "NX");
    return readVersion(redis, key);
  });
  if (version > LAYOUT_VERSION) {
    throw new TesseraError(
      "schema_unavailable",
      `the key prefix is at layout version ${version}, newer than this build (${LAYOUT_VERSION})`,
    );
  }
  if (version === 1) await migrateFromVersion1(connection);
}

async function readVersion(redis: Redis, key: string): Promise<number> {
  const version = Number(await redis.get(key));
  if (!Number.isInteger(version) || version < 1) {
    throw new TesseraError("store_self_test_failed", "the prefix's layout version is unreadable");
  }
  return version;
}

/**
 * Renames every version-1 claim to its version-2 key (RENAMENX keeps the value and the TTL)
 * and drops the index sets, under a lock so two processes opening at once do not both
 * migrate; the other waits for the version to read 2. Workers of the old build must be
 * stopped first: a claim they write during the migration would be missed by the new layout.
 */
async function migrateFromVersion1(connection: Connection): Promise<void> {
  const versionKey = connection.key("layout-version");
  const lockKey = connection.key("layout-migration");
  const token = randomUUID();
  return connection.run("store_unavailable", async (redis) => {
    const locked = await redis.set(lockKey, token, "PX", MIGRATION_WAIT_MS, "NX");
    if (locked !== "OK") return waitForMigration(redis, versionKey);
    try {
      await scanKeys(redis, connection.key("claim", "*"), async (keys) => {
        for (const old of keys) {
          const rest = old.slice(connection.key("claim", "").length);
          if (rest.includes(":")) continue; // already a version-2 key
          const value = await redis.get(old);
          if (value === null) continue; // expired meanwhile
          const claim = readStoredClaim(value);
          if (!claim) {
            // Fail closed: dropping it would let that call ID run again.
            throw new TesseraError(
              "schema_unavailable",
              `layout migration stopped: the claim under ${old} is unreadable`,
            );
          }
          const renamed = connection.key(
            "claim",
            storageDigest(claim.session),
            storageDigest(claim.functionCallId),
          );
          if ((await redis.renamenx(old, renamed)) === 0) await redis.del(old);
        }
      });
      await scanKeys(redis, connection.key("session", "*"), async (keys) => {
        if (keys.length > 0) await redis.unlink(...keys);
      });
      await redis.unlink(connection.key("in-doubt"));
      await redis.set(versionKey, String(LAYOUT_VERSION));
    } finally {
      if ((await redis.get(lockKey)) === token) await redis.del(lockKey);
    }
  });
}

async function waitForMigration(redis: Redis, versionKey: string): Promise<void> {
  const deadline = Date.now() + MIGRATION_WAIT_MS;
  while (Date.now() < deadline) {
    if ((await readVersion(redis, versionKey)) !== 1) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new TesseraError(
    "schema_unavailable",
    "another process is migrating the key prefix from layout version 1 and has not finished",
  );
}
