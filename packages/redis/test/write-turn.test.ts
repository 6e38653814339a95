/**
 * Writers that keep colliding take turns (`src/write-turn.ts`). CI once saw a process of 8,
 * appending to one stream on a Redis Cluster, lose 64 tries in a row and fail: the winner of
 * each round knows the new head first and goes again while the losers relearn it. Here a
 * writer that never pauses (the hog) competes with one that records in turn (the victim);
 * then the turn itself: held by another writer it stops every write, given back or lapsed it
 * lets them through.
 */
import { verifyAuditChain } from "@tessera/core";
import { actEvent, serviceUrl } from "@tessera/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { RedisAuditSink } from "../src/audit-sink.js";
import type { Connection } from "../src/connection.js";
import { TURN_TTL_MS, turnKeyOf } from "../src/write-turn.js";
import {
  admin,
  openOwnLedger,
  openTestStores,
  type TestStores,
} from "./support/redis-test-stores.js";

const url = serviceUrl("TESSERA_REDIS_URL");
const suite = url ? describe : describe.skip;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function opened(): Promise<TestStores> {
  const stores = await openTestStores(url as string);
  cleanups.push(stores.close);
  return stores;
}

async function ownLedger(stores: TestStores) {
  const own = await openOwnLedger(stores);
  cleanups.push(() => own.connection.close());
  return own;
}

function turnHolder(connection: Connection): Promise<string | null> {
  return admin(url as string, (redis) => redis.get(turnKeyOf(connection)));
}

function settledWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  return Promise.race([
    promise.then(() => true),
    new Promise<boolean>((resolve) => setTimeout(() => resolve(false), ms)),
  ]);
}

suite("redis write turn", () => {
  it("a writer that keeps losing to a busy one takes the turn: every record lands within a few tries", async () => {
    const stores = await opened();
    const hog = await ownLedger(stores);
    const victim = await ownLedger(stores);
    let hogging = true;
    let hogged = 0;
    const hogLoop = (async () => {
      while (hogging) {
        await hog.ledger.record({ event: actEvent(`hog-${hogged}`) });
        hogged++;
      }
    })();
    const tries: number[] = [];
    try {
      // Let the hog run first, so the victim starts behind a head that keeps moving.
      while (hogged < 20) await new Promise((resolve) => setTimeout(resolve, 1));
      for (let i = 0; i < 40; i++) {
        victim.connection.sent.reset();
        await victim.ledger.record({ event: actEvent(`victim-${i}`) });
        tries.push(victim.connection.sent.of("evalsha") + victim.connection.sent.of("eval"));
      }
    } finally {
      hogging = false;
      await hogLoop;
    }
    // The hog made the victim lose (more tries than records), and yet no record took more
    // than a handful: lose, ask for the turn, write with it (or wait out the hog's turn).
    // Before turns, the victim lost 64 in a row here and failed.
    expect(tries.reduce((sum, n) => sum + n, 0)).toBeGreaterThan(tries.length);
    expect(Math.max(...tries)).toBeLessThanOrEqual(12);
    const trail = await stores.stores.audit.read();
    expect(trail.filter((e) => e.callId.startsWith("victim-"))).toHaveLength(40);
    expect(trail).toHaveLength(40 + hogged);
    expect(verifyAuditChain(trail).ok).toBe(true);
    // Nobody holds the turn once the writing stops.
    expect(await turnHolder(victim.connection)).toBeNull();
  });

  it("while another writer holds the turn nothing is written; given back, the act lands", async () => {
    const stores = await opened();
    const { connection, ledger } = await ownLedger(stores);
    const key = turnKeyOf(connection);
    await admin(url as string, (redis) => redis.set(key, "another-writer", "PX", 20_000));
    const recording = ledger.record({ event: actEvent("waits") });
    expect(await settledWithin(recording, 300)).toBe(false);
    expect(await stores.stores.audit.read()).toHaveLength(0);

    await admin(url as string, (redis) => redis.del(key));
    expect(await recording).toMatchObject({ status: "recorded" });
    expect((await stores.stores.audit.read()).map((e) => e.callId)).toEqual(["waits"]);
  });

  it("a turn whose holder died lapses: the audit sink's own appends wait for it, then land", async () => {
    const stores = await opened();
    const { connection } = await ownLedger(stores);
    const sink = new RedisAuditSink(connection);
    await admin(url as string, (redis) =>
      redis.set(turnKeyOf(connection), "dead", "PX", TURN_TTL_MS),
    );
    const started = Date.now();
    await Promise.all([sink.append(actEvent("a-1")), sink.append(actEvent("a-2"))]);
    // Nothing could be written before the turn lapsed (less a little clock slack).
    expect(Date.now() - started).toBeGreaterThanOrEqual(TURN_TTL_MS - 100);
    const trail = await stores.stores.audit.read();
    expect(trail.map((e) => e.callId).sort()).toEqual(["a-1", "a-2"]);
    expect(verifyAuditChain(trail).ok).toBe(true);
  });
});
