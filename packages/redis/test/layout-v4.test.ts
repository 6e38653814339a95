/**
 * A prefix as the previous release (layout version 3) left it — claims as `record` or
 * `record \n receipt`, an audit stream linked with the v1 rule and its head in `audit-heads`,
 * a spent counter — opened by this build: it moves to version 4 in place, the old claims
 * read back as they were (no answer), an old open claim takes an answer when settled, and
 * the act ledger continues the old chain and counter; the whole trail verifies.
 */
import { type AuditEvent, verifyAuditChain } from "@tessera/core";
import { auditEventHash, GENESIS_HASH, storageDigest } from "@tessera/core/store-kit";
import { serviceUrl, spendingAct } from "@tessera/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { LAYOUT_VERSION, openStores } from "../src/index.js";
import { admin, deletePrefix, freshPrefix, withParams } from "./support/redis-test-stores.js";

const url = serviceUrl("TESSERA_REDIS_URL");
const suite = url ? describe : describe.skip;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** An event of the conformance suite's namespace, linked with the v1 rule as 0.1 did. */
function v1Linked(callId: string, seq: number, prev: string): AuditEvent {
  const { exhausted: _e, ...act } = spendingAct(callId);
  const unlinked = { ...act.event, seq, prev };
  return { ...unlinked, hash: auditEventHash(unlinked as AuditEvent) } as AuditEvent;
}

suite("redis layout version 3 → 4", () => {
  it("opens a version-3 prefix in place: old claims, counters and chain stay readable and verifiable", async () => {
    const prefix = freshPrefix();
    cleanups.push(() => deletePrefix(url as string, prefix));
    const claimKey = (id: string) => `${prefix}claim:${storageDigest("s")}:${storageDigest(id)}`;
    const first = v1Linked("old-1", 1, GENESIS_HASH);
    const second = v1Linked("old-2", 2, first.hash as string);
    await admin(url as string, async (redis) => {
      await redis.set(`${prefix}layout-version`, "3");
      const record = (id: string) =>
        JSON.stringify({ session: "s", functionCallId: id, bodyHash: "h", claimedAt: 1 });
      await redis.set(claimKey("old-open"), record("old-open"), "PX", 60_000);
      await redis.set(
        claimKey("old-done"),
        `${record("old-done")}\n{"status":"dispatched","settledAt":2}`,
        "PX",
        60_000,
      );
      for (const event of [first, second]) {
        const id = await redis.xadd(`${prefix}audit`, "*", "e", JSON.stringify(event));
        await redis.rpush(`${prefix}audit-call:${storageDigest(event.callId)}`, id as string);
      }
      await redis.hset(`${prefix}audit-heads`, "ns-acts", `2:${second.hash}`);
      // The v3 build's counter key for (ns-acts, ticket): one use of three spent.
      await redis.set(`${prefix}usage:${storageDigest("ns-acts", "ticket")}`, "1");
    });

    const stores = await openStores(withParams(url as string, { prefix }));
    cleanups.push(() => stores.close());
    expect(await admin(url as string, (redis) => redis.get(`${prefix}layout-version`))).toBe(
      String(LAYOUT_VERSION),
    );
    expect(LAYOUT_VERSION).toBe(4);

    const done = await stores.claims.get({ session: "s", functionCallId: "old-done" });
    expect(done).toEqual({
      session: "s",
      functionCallId: "old-done",
      bodyHash: "h",
      claimedAt: 1,
      receipt: { status: "dispatched", settledAt: 2 },
    });
    const open = { session: "s", functionCallId: "old-open" };
    expect((await stores.claims.listInDoubt("s")).map((c) => c.functionCallId)).toEqual([
      "old-open",
    ]);
    await stores.claims.settle(open, { status: "dispatched", settledAt: 3 }, { messageId: "m" });
    expect((await stores.claims.get(open))?.answer).toEqual({ messageId: "m" });
    // The old claims still block their call IDs, through the act ledger too.
    expect(await stores.acts.record(spendingAct("old-done", "ticket", 3))).toMatchObject({
      status: "already_claimed",
      existing: { receipt: { status: "dispatched", settledAt: 2 } },
    });

    // The ledger continues the old counter and the old chain (v2 links after v1 ones).
    expect(await stores.acts.record(spendingAct("new-1", "ticket", 3))).toEqual({
      status: "recorded",
      recorded: "event",
      used: 2,
    });
    expect(await stores.usage.getUsage("ns-acts", "ticket")).toBe(2);
    const trail = await stores.audit.read();
    expect(trail.map((event) => [event.callId, event.seq])).toEqual([
      ["old-1", 1],
      ["old-2", 2],
      ["new-1", 3],
    ]);
    expect(trail[2]?.prev).toBe(second.hash);
    const verdict = verifyAuditChain(trail);
    expect(verdict.ok).toBe(true);
    expect(verdict.streams).toEqual([
      expect.objectContaining({ stream: "ns-acts", events: 3, unchained: 0 }),
    ]);
    expect((await stores.audit.read({ callId: "old-2" })).map((e) => e.seq)).toEqual([2]);
  });
});
