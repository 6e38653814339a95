import { randomUUID } from "node:crypto";
import { TesseraError } from "@tessera/core";
import { claimKeyDigest, storageDigest } from "@tessera/core/store-kit";
import type { PostgresClaimStore } from "./claim-store.js";
import type { Database } from "./database.js";
import type { PostgresUsageStore } from "./usage-store.js";

/**
 * Proves, on probe keys and through the very code that will serve, the two primitives the
 * guarantees rest on: a second insert-if-absent is refused, and a bounded consume stops at
 * its bound. A schema whose primary key was dropped, a trigger that rewrites counters, a
 * proxy that swallows conflicts: any of them makes the store refuse to open rather than
 * leave the gate open. The probe rows are removed afterwards.
 */
export async function selfTest(
  db: Database,
  claims: PostgresClaimStore,
  usage: PostgresUsageStore,
): Promise<void> {
  const probe = `tessera-self-test-${randomUUID()}`;
  const key = { session: probe, functionCallId: "probe" };
  const failures: string[] = [];
  try {
    const record = { bodyHash: "probe", claimedAt: Date.now() };
    const first = await claims.claim(key, record);
    const second = await claims.claim(key, record);
    if (first.status !== "claimed") failures.push("a fresh probe key was not claimed");
    if (second.status !== "already_claimed")
      failures.push("a second insert-if-absent was accepted");

    const bound = 2;
    const outcomes = [];
    for (let i = 0; i < bound + 1; i++)
      outcomes.push(await usage.tryConsume(probe, "probe", bound));
    const consumed = outcomes.filter((outcome) => outcome.consumed).length;
    const used = await usage.getUsage(probe, "probe");
    if (consumed !== bound || used !== bound || outcomes[bound]?.used !== bound) {
      failures.push(`a bounded consume (max ${bound}) gave ${consumed} successes, count ${used}`);
    }
  } finally {
    await cleanUp(db, probe, claimKeyDigest(key));
  }
  if (failures.length > 0) {
    throw new TesseraError(
      "store_self_test_failed",
      `PostgreSQL store refused to serve: ${failures.join("; ")}`,
    );
  }
}

async function cleanUp(db: Database, probe: string, claimId: string): Promise<void> {
  await db.query("claim_store_unavailable", `DELETE FROM ${db.table("claims")} WHERE key = $1`, [
    claimId,
  ]);
  await db.query("usage_store_unavailable", `DELETE FROM ${db.table("usage")} WHERE key = $1`, [
    storageDigest(probe, "probe"),
  ]);
}
