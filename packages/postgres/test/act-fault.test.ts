/**
 * Issue 22's fault, on real PostgreSQL: the audit head table locked by another connection
 * while acts are recorded, with `statementTimeoutMs=1500`. Cut along the stores, the claim and
 * the spend committed before the event stalled: a spent ticket with no event and a claim that
 * blocked its call ID forever. The ledger's one statement is cancelled whole: the act fails
 * with its `*_unavailable` code, nothing of it is written, and once the lock is released the
 * same act, retried, is decided and recorded. A withdrawal stalled the same way is cancelled
 * whole too: the claim stays open and the use spent until it is sent again.
 */
import { type Act, verifyAuditChain } from "@tessera/core";
import { actEvent, serviceUrl, spendingAct, withdrawalOf } from "@tessera/testkit";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { codeOf, storesPerTest, type TestStores } from "./support/pg-test-stores.js";

const url = serviceUrl("TESSERA_PG_URL");
const suite = url ? describe : describe.skip;
const opened = storesPerTest(url);

const NS = "ns-acts";
const key = (id: string) => ({ session: "s", functionCallId: id });

/** Another connection holding `lock` (statements run in its open transaction) until released. */
async function holding(test: TestStores, lock: string): Promise<{ release(): Promise<void> }> {
  const client = new pg.Client({ connectionString: url as string });
  await client.connect();
  await client.query("BEGIN");
  await client.query(lock.replaceAll("$schema", `"${test.schema}"`));
  return {
    release: async () => {
      await client.query("ROLLBACK");
      await client.end();
    },
  };
}

/** What the store holds of an act on `id` spending grant `grantId`: claim, events, uses. */
async function leftOf(test: TestStores, id: string, grantId: string) {
  const { stores } = test;
  return {
    claim: await stores.claims.get(key(id)),
    events: (await stores.audit.read({ callId: id })).length,
    used: await stores.usage.getUsage(NS, grantId),
  };
}

/** Records `acts` while `lock` is held: every one must fail closed within the timeout. */
async function recordUnderLock(test: TestStores, lock: string, acts: readonly Act[]) {
  const held = await holding(test, lock);
  try {
    const started = Date.now();
    const results = await Promise.allSettled(acts.map((act) => test.stores.acts.record(act)));
    const waited = Date.now() - started;
    for (const result of results) {
      expect(result.status).toBe("rejected");
      const reason = (result as PromiseRejectedResult).reason;
      expect(codeOf(reason)).toMatch(/_unavailable$/);
      // Cancelled by the server's statement_timeout (query_canceled), not a client give-up.
      expect((reason as { cause?: { code?: string } }).cause?.code).toBe("57014");
    }
    expect(waited).toBeGreaterThanOrEqual(1_400);
    expect(waited).toBeLessThan(2_500 + 1_000);
    // Nothing of any act, even while the lock is still held (reads do not touch the heads).
    for (const act of acts) {
      const id = act.event.callId;
      expect(await leftOf(test, id, act.spend?.grantId ?? "none")).toEqual({
        claim: undefined,
        events: 0,
        used: 0,
      });
    }
    const ids = new Set(acts.map((act) => act.event.callId));
    const inDoubt = await test.stores.claims.listInDoubt();
    expect(inDoubt.filter((claim) => ids.has(claim.functionCallId))).toEqual([]);
  } finally {
    await held.release();
  }
}

suite("postgres act ledger: the audit head table locked (statementTimeoutMs=1500)", () => {
  it("a table lock: the act fails closed, nothing is written, a retry is decided", async () => {
    const test = await opened({ statementTimeoutMs: "1500" });
    const acts = [spendingAct("f-1", "f-1"), spendingAct("f-2", "f-2")];
    await recordUnderLock(test, "LOCK TABLE $schema.audit_heads IN EXCLUSIVE MODE", acts);
    for (const act of acts) {
      expect(await test.stores.acts.record(act)).toEqual({
        status: "recorded",
        recorded: "event",
        used: 1,
      });
      const id = act.event.callId;
      expect(await leftOf(test, id, id)).toMatchObject({ events: 1, used: 1 });
      // The claim is the retry's own, open until its call is settled: in doubt, not stuck.
      expect((await test.stores.claims.get(key(id)))?.receipt).toBeUndefined();
    }
    expect(verifyAuditChain(await test.stores.audit.read()).ok).toBe(true);
  }, 20_000);

  it("the stream's head row locked: a denial and a spend fail closed; retried, both land", async () => {
    const test = await opened({ statementTimeoutMs: "1500" });
    // The stream exists, so its head row is there to be locked.
    await test.stores.acts.record(spendingAct("first", "first"));
    const denial: Act = {
      claim: { key: key("d-1"), record: { bodyHash: "d".repeat(64), claimedAt: 1 } },
      event: actEvent("d-1", "no_matching_grant"),
    };
    const acts = [spendingAct("h-1", "h-1"), denial];
    await recordUnderLock(test, "SELECT * FROM $schema.audit_heads FOR UPDATE", acts);
    expect((await test.stores.acts.record(acts[0] as Act)).status).toBe("recorded");
    expect(await test.stores.acts.record(denial)).toEqual({
      status: "recorded",
      recorded: "event",
    });
    expect(await test.stores.claims.get(key("d-1"))).toMatchObject({
      receipt: { status: "denied" },
      answer: { status: "denied", code: "no_matching_grant" },
    });
    const events = await test.stores.audit.read();
    expect(events.map((event) => event.callId)).toEqual(["first", "h-1", "d-1"]);
    expect(verifyAuditChain(events).ok).toBe(true);
  }, 20_000);

  it("the claim store's code for an act with a claim, usage's with a spend only, audit's alone", async () => {
    const test = await opened({ statementTimeoutMs: "1500" });
    const held = await holding(test, "LOCK TABLE $schema.audit_heads IN EXCLUSIVE MODE");
    try {
      const { claim: _claim, ...spendOnly } = spendingAct("x-2", "x-2");
      const results = await Promise.allSettled([
        test.stores.acts.record(spendingAct("x-1", "x-1")),
        test.stores.acts.record(spendOnly),
        test.stores.acts.record({ event: actEvent("x-3", "no_matching_grant") }),
      ]);
      expect(results.map((result) => codeOf((result as PromiseRejectedResult).reason))).toEqual([
        "claim_store_unavailable",
        "usage_store_unavailable",
        "audit_unavailable",
      ]);
    } finally {
      await held.release();
    }
    expect(await test.stores.audit.read()).toEqual([]);
  }, 20_000);

  it("a withdrawal stalled at the head is rolled back whole; sent again, it withdraws", async () => {
    const test = await opened({ statementTimeoutMs: "1500" });
    const act = spendingAct("w-1", "w-1");
    await test.stores.acts.record(act);
    const withdraw = test.stores.acts.withdraw?.bind(test.stores.acts);
    if (withdraw === undefined) throw new Error("the PostgreSQL ledger withdraws");
    const before = await leftOf(test, "w-1", "w-1");
    expect(before).toMatchObject({ events: 1, used: 1 });
    const held = await holding(test, "SELECT * FROM $schema.audit_heads FOR UPDATE");
    try {
      const stalled = await withdraw(withdrawalOf(act)).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(codeOf(stalled)).toBe("claim_store_unavailable");
      expect((stalled as { cause?: { code?: string } }).cause?.code).toBe("57014");
      // Claim settle and use given back were rolled back with the stalled event.
      expect(await leftOf(test, "w-1", "w-1")).toEqual(before);
    } finally {
      await held.release();
    }
    expect(await withdraw(withdrawalOf(act))).toBe("withdrawn");
    expect(await leftOf(test, "w-1", "w-1")).toMatchObject({
      claim: { receipt: { status: "failed" } },
      events: 2,
      used: 0,
    });
    expect(verifyAuditChain(await test.stores.audit.read()).ok).toBe(true);
  }, 20_000);
});
