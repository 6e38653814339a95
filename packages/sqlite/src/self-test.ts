import { randomUUID } from "node:crypto";
import { TesseraError } from "@tessera/core";
import type { SqliteClaimStore } from "./claim-store.js";
import type { SqliteDatabase } from "./database.js";
import type { SqliteUsageStore } from "./usage-store.js";

class RollBack extends Error {}

function driverCode(error: unknown): string | undefined {
  const cause = (error as { cause?: unknown })?.cause ?? error;
  const code = (cause as { code?: unknown })?.code;
  return typeof code === "string" ? code : undefined;
}

/**
 * Proves, on this file with this driver and build, the two primitives every guarantee rests
 * on: a second insert-if-absent of a key is refused (and hands back the first record), and a
 * bounded consume stops at its bound. Also checks that the durability settings asked for
 * took effect. The probe runs inside a transaction that is rolled back, so it leaves nothing
 * behind and processes opening at once never see each other's probe.
 */
export function selfTest(
  db: SqliteDatabase,
  claims: SqliteClaimStore,
  usage: SqliteUsageStore,
): void {
  const failures: string[] = [];
  const expectWal = db.config.path !== ":memory:";
  if (expectWal && String(db.pragma("journal_mode")).toLowerCase() !== "wal") {
    failures.push("journal_mode is not WAL");
  }
  const synchronous = Number(db.pragma("synchronous"));
  if (synchronous !== (db.config.synchronous === "FULL" ? 2 : 1)) {
    failures.push("the synchronous setting did not take effect");
  }
  try {
    db.immediate(() => {
      const key = { session: `tessera-self-test-${randomUUID()}`, functionCallId: "probe" };
      const first = claims.claimNow(key, { bodyHash: "first", claimedAt: 1 });
      const second = claims.claimNow(key, { bodyHash: "second", claimedAt: 2 });
      if (first.status !== "claimed") failures.push("a fresh claim was not granted");
      if (second.status !== "already_claimed" || second.existing.bodyHash !== "first") {
        failures.push("a second insert-if-absent was not refused with the first record");
      }
      const spent = [1, 2, 3].map(() => usage.consume(key.session, "probe", 2).consumed);
      if (spent.join() !== "true,true,false" || usage.readUsage(key.session, "probe") !== 2) {
        failures.push("a bounded consume did not stop at its bound");
      }
      throw new RollBack();
    });
  } catch (error) {
    if (!(error instanceof RollBack)) {
      // Locked past the busy timeout: the store is unavailable, not broken.
      if (driverCode(error)?.startsWith("SQLITE_BUSY")) throw error;
      failures.push("a probe statement failed");
      throw new TesseraError(
        "store_self_test_failed",
        `SQLite self-test failed: ${failures.join("; ")}`,
        {
          cause: error,
        },
      );
    }
  }
  if (failures.length > 0) {
    throw new TesseraError(
      "store_self_test_failed",
      `SQLite self-test failed: ${failures.join("; ")}`,
    );
  }
}
