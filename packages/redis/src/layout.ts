import { randomUUID } from "node:crypto";
import { TesseraError } from "@tessera/core";
import { claimKeyOf, readStoredClaim } from "./claim-store.js";
import type { Client } from "./client.js";
import { type Connection, script } from "./connection.js";
import { scanKeys } from "./scan-keys.js";

/**
 * The version of the key layout (docs/stores.md, "Redis"), kept under `<prefix>layout-version`.
 * Redis has no schema, but the layout is one: a prefix written by a newer Tessera is refused
 * rather than half understood, and an older one is migrated here before anything is served.
 * Written with SET NX, so processes opening a fresh prefix at once agree on one value.
 *
 * - 1: `claim:<sha256(session, id)>`, with a `session:<sha256(session)>` set and an
 *   `in-doubt` set beside every claim.
 * - 2: `claim:<sha256(session)>:<sha256(id)>`, no index sets (a claim is one SET).
 * - 3: the audit trail is a hash chain per stream, each stream's head a field of
 *   `audit-heads`. Nothing is rewritten: entries written before stay as they were, the
 *   unchained start of their stream. The version moves so that a version-2 build, which
 *   would append unlinked events into a chained trail, refuses the prefix. Also (the same
 *   unreleased version) `grants-versions:<ns>`, each holder's grants version, set with every
 *   grant change: a version-2 build, which would change grants without it, is refused too.
 *   A holder without a field has had no grant change since (version "0").
 * - 4: a settled claim may carry its answer, on a third line after the receipt
 *   (`record \n receipt \n answer`), and the act ledger writes claim, spend and event in one
 *   script. Nothing is rewritten: a claim written before reads as it did, without an answer.
 *   The version moves so that a version-3 build, which would read the receipt and answer
 *   lines as one unreadable receipt (and fail closed on every such claim), refuses the prefix.
 */
export const LAYOUT_VERSION = 4;

/**
 * Versions 2 and 3 move to 4 with no data change (only a prefix still at 2 or 3 is moved,
 * never back).
 */
const FROM_VERSION_2_OR_3 = script(`
local version = redis.call('GET', KEYS[1])
if version == '2' or version == '3' then redis.call('SET', KEYS[1], ARGV[1]) end
return 1
`);

/** How long a process waits for another one's migration before refusing to open. */
const MIGRATION_WAIT_MS = 30_000;
/** The migration lock's lifetime, refreshed per batch of 1,000 keys. */
const LOCK_MS = 10_000;

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
  if (version === 2 || version === 3) {
    await connection.eval("store_unavailable", FROM_VERSION_2_OR_3, [key], [LAYOUT_VERSION]);
  }
}

/**
 * For a reader, which writes nothing: the prefix holds a Tessera store, at a layout this build
 * reads. Every layout keeps the audit trail in the same stream, so an older one is read as it
 * is; a newer one is refused, as `checkLayout` refuses it. Returns the version found (a claim
 * reader refuses an older one).
 */
export async function checkReadableLayout(connection: Connection): Promise<number> {
  const key = connection.key("layout-version");
  const stored = await connection.run("store_unavailable", (redis) => redis.get(key));
  if (stored === null) {
    throw new TesseraError("schema_unavailable", "the key prefix holds no Tessera store");
  }
  const version = await connection.run("store_unavailable", (redis) => readVersion(redis, key));
  if (version > LAYOUT_VERSION) {
    throw new TesseraError(
      "schema_unavailable",
      `the key prefix is at layout version ${version}, newer than this build (${LAYOUT_VERSION})`,
    );
  }
  return version;
}

async function readVersion(redis: Client, key: string): Promise<number> {
  const version = Number(await redis.get(key));
  if (!Number.isInteger(version) || version < 1) {
    throw new TesseraError("store_self_test_failed", "the prefix's layout version is unreadable");
  }
  return version;
}

/**
 * Renames every version-1 claim to its version-2 key (RENAMENX keeps the value and the TTL)
 * and drops the index sets. One process migrates, holding a lock it refreshes per batch;
 * others opening meanwhile wait for the version to read 2, and take over if the lock lapses
 * (its holder died: renaming is idempotent, so the work resumes where it stopped). Workers
 * of the old build must be stopped first: a claim they write during the migration would be
 * missed by the new layout.
 */
async function migrateFromVersion1(connection: Connection): Promise<void> {
  const versionKey = connection.key("layout-version");
  const lockKey = connection.key("layout-migration");
  const token = randomUUID();
  const deadline = Date.now() + MIGRATION_WAIT_MS;
  await connection.run("store_unavailable", async (redis) => {
    while ((await readVersion(redis, versionKey)) === 1) {
      if ((await redis.set(lockKey, token, "PX", LOCK_MS, "NX")) === "OK") {
        try {
          await migrate(connection, redis, () => redis.pexpire(lockKey, LOCK_MS));
          await redis.set(versionKey, String(LAYOUT_VERSION));
        } finally {
          if ((await redis.get(lockKey)) === token) await redis.del(lockKey);
        }
        return;
      }
      if (Date.now() > deadline) {
        throw new TesseraError(
          "schema_unavailable",
          "another process is migrating the key prefix from layout version 1 and has not finished",
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  });
}

async function migrate(
  connection: Connection,
  redis: Client,
  keepLock: () => Promise<unknown>,
): Promise<void> {
  const claimPrefix = connection.key("claim", "");
  await scanKeys(redis, `${claimPrefix}*`, async (keys) => {
    await keepLock();
    for (const old of keys) {
      if (old.slice(claimPrefix.length).includes(":")) continue; // already a version-2 key
      const value = await redis.get(old);
      if (value === null) continue; // expired or renamed meanwhile
      const claim = readStoredClaim(value);
      if (!claim) {
        // Fail closed: dropping it would let that call ID run again.
        throw new TesseraError(
          "schema_unavailable",
          `layout migration stopped: the claim under ${old} is unreadable`,
        );
      }
      // A claim already at its new key (a migration that died after renaming) stands.
      if ((await redis.renamenx(old, claimKeyOf(connection, claim))) === 0) await redis.del(old);
    }
  });
  await scanKeys(redis, connection.key("session", "*"), async (keys) => {
    if (keys.length > 0) await redis.unlink(...keys);
  });
  await redis.unlink(connection.key("in-doubt"));
}
