import {
  type Act,
  type AuditEvent,
  type JsonValue,
  verifyAuditChain,
  type Withdrawal,
} from "@tessera/core";
import { describe, expect, it } from "vitest";
import { type ActLedgerPorts, actEvent, NS, spendingAct } from "./act-ledger-fixtures.js";
import { expectCode, resultOrCode } from "./errors.js";
import { type OpenedStore, type StoreFactory, withStore } from "./factory.js";
import { HOSTILE_KEYS } from "./hostile.js";

/** Withdrawals of one act racing each other. */
const RACERS = 16;
/** Acts recorded, then half withdrawn while as many new ones are recorded on the same grant. */
const MIXED = 24;
const SKIPPED = "skipped: this ledger has no withdraw (optional in ActLedger)";

/** The withdrawal's event for an act on `callId`: a refusal, reason `act_withdrawn`. */
export function withdrawnEvent(callId: string): AuditEvent {
  return {
    ...actEvent(callId),
    at: "2026-06-01T00:00:05.000Z",
    outcome: "denied",
    code: "tool_unavailable",
    reason: "act_withdrawn",
    detail: "the store's answer was lost: the act was withdrawn, its use given back",
  };
}

/** What a withdrawn claim answers to retries (nested, to check it reads back exactly). */
function answerOf(callId: string): JsonValue {
  return { status: "failed", code: "tool_unavailable", callId, why: ["withdrawn", null, 1] };
}

/** A withdrawal of `act` (which must carry a claim). */
export function withdrawalOf(act: Act): Withdrawal {
  if (act.claim === undefined) throw new Error("a withdrawal needs an act with a claim");
  const callId = act.event.callId;
  return {
    act: act as Withdrawal["act"],
    event: withdrawnEvent(callId),
    answer: answerOf(callId),
  };
}

/** A claimed act without a spend: its event allows, nothing bounded is used. */
function unspendingAct(callId: string): Act {
  const { spend: _spend, exhausted: _exhausted, ...act } = spendingAct(callId);
  return act;
}

/** Everything the ports read back, to check that an answer wrote nothing. */
async function snapshot(store: ActLedgerPorts, grantId = "ticket") {
  return {
    used: await store.usage.getUsage(NS, grantId),
    inDoubt: await store.claims.listInDoubt(),
    events: await store.audit.read(),
  };
}

type Withdrawer = NonNullable<ActLedgerPorts["acts"]["withdraw"]>;

/**
 * The optional `ActLedger.withdraw`: a recorded, unsettled act is withdrawn whole (claim
 * settled `failed` with the answer, use given back, event appended, chain intact) exactly
 * once, even against concurrent withdrawals; anything else (no claim, another record, a
 * settled claim, a denial) writes nothing; a record of hostile strings (NUL, quotes) is
 * compared exactly. The receipt's `settledAt` is the withdrawal event's instant, as a
 * denial's settle takes its event's. Each case skips, saying so, on a
 * ledger without `withdraw`.
 */
export function describeWithdrawConformance<H extends OpenedStore<ActLedgerPorts>>(
  name: string,
  factory: StoreFactory<ActLedgerPorts, H>,
): void {
  const known = factory.knownFailures ?? [];
  const check = (title: string, body: (store: ActLedgerPorts, w: Withdrawer) => Promise<void>) => {
    // Known failures are listed by the title as reported, "withdraw: " included.
    const full = `withdraw: ${title}`;
    const run = known.some((prefix) => full.startsWith(prefix)) ? it.fails : it;
    run(full, (ctx) =>
      withStore(factory, async ({ store }) => {
        const withdraw = store.acts.withdraw?.bind(store.acts);
        if (withdraw === undefined) ctx.skip(SKIPPED);
        else await body(store, withdraw);
      }),
    );
  };

  describe(`ActLedger withdraw conformance: ${name}`, () => {
    check(
      "a recorded act with a spend: use given back, claim failed with its answer",
      async (store, withdraw) => {
        await store.acts.record(spendingAct("w-0", "ticket", 5));
        const act = spendingAct("w-1", "ticket", 5);
        expect(await store.acts.record(act)).toMatchObject({ status: "recorded", used: 2 });
        const withdrawal = withdrawalOf(act);
        expect(await withdraw(withdrawal)).toBe("withdrawn");
        expect(await store.usage.getUsage(NS, "ticket")).toBe(1);
        const key = { session: "s", functionCallId: "w-1" };
        const claim = await store.claims.get(key);
        expect(claim?.receipt).toEqual({
          status: "failed",
          settledAt: Date.parse(withdrawal.event.at),
        });
        expect(claim?.answer).toEqual(answerOf("w-1"));
        expect(claim).toMatchObject({ bodyHash: "b".repeat(64), claimedAt: 1_780_000_000_000 });
        const events = await store.audit.read({ callId: "w-1" });
        expect(events.map((e) => e.reason)).toEqual(["allowed", "act_withdrawn"]);
        expect(events[1]).toMatchObject({ outcome: "denied", code: "tool_unavailable", seq: 3 });
        const all = await store.audit.read();
        expect(all).toHaveLength(3);
        expect(verifyAuditChain(all).ok).toBe(true);
        expect(await store.claims.listInDoubt()).toEqual([
          expect.objectContaining({ functionCallId: "w-0" }),
        ]);
        // A retry of the call ID reads the withdrawal's answer back, and spends nothing.
        const retry = await store.acts.record(act);
        expect(retry.status).toBe("already_claimed");
        if (retry.status === "already_claimed") {
          expect(retry.existing.receipt?.status).toBe("failed");
          expect(retry.existing.answer).toEqual(answerOf("w-1"));
        }
        expect(await store.usage.getUsage(NS, "ticket")).toBe(1);
      },
    );

    check(
      "a recorded act without a spend: claim failed, event appended, no use touched",
      async (store, withdraw) => {
        await store.acts.record(spendingAct("w-2"));
        const act = unspendingAct("w-3");
        expect(await store.acts.record(act)).toEqual({ status: "recorded", recorded: "event" });
        expect(await withdraw(withdrawalOf(act))).toBe("withdrawn");
        expect(await store.usage.getUsage(NS, "ticket")).toBe(1);
        const claim = await store.claims.get({ session: "s", functionCallId: "w-3" });
        expect(claim?.receipt?.status).toBe("failed");
        expect(claim?.answer).toEqual(answerOf("w-3"));
        const events = await store.audit.read({ callId: "w-3" });
        expect(events.map((e) => e.reason)).toEqual(["allowed", "act_withdrawn"]);
        expect(verifyAuditChain(await store.audit.read()).ok).toBe(true);
      },
    );

    check(
      "an act never recorded: not_recorded, nothing written, a record decides afresh",
      async (store, withdraw) => {
        await store.acts.record(spendingAct("w-4", "ticket", 2));
        const before = await snapshot(store);
        const act = spendingAct("w-5", "ticket", 2);
        expect(await withdraw(withdrawalOf(act))).toBe("not_recorded");
        expect(await snapshot(store)).toEqual(before);
        expect(await store.claims.get({ session: "s", functionCallId: "w-5" })).toBeUndefined();
        expect(await store.acts.record(act)).toEqual({
          status: "recorded",
          recorded: "event",
          used: 2,
        });
      },
    );

    check(
      "a second withdrawal of the act is kept: no second use given back",
      async (store, withdraw) => {
        await store.acts.record(spendingAct("w-6", "ticket", 5));
        const act = spendingAct("w-7", "ticket", 5);
        await store.acts.record(act);
        expect(await withdraw(withdrawalOf(act))).toBe("withdrawn");
        const before = await snapshot(store);
        expect(before.used).toBe(1);
        expect(await withdraw(withdrawalOf(act))).toBe("kept");
        expect(await snapshot(store)).toEqual(before);
      },
    );

    check(
      "a claim holding another record (claimedAt, worker, body) is kept",
      async (store, withdraw) => {
        const act = spendingAct("w-8", "ticket", 5);
        await store.acts.record(act);
        const before = await snapshot(store);
        const claim = act.claim as NonNullable<Act["claim"]>;
        const others = [
          { ...claim.record, claimedAt: claim.record.claimedAt + 1 },
          { ...claim.record, worker: "another-worker" },
          { ...claim.record, bodyHash: "c".repeat(64) },
        ];
        for (const record of others) {
          const other = { ...act, claim: { key: claim.key, record } };
          expect(await withdraw(withdrawalOf(other))).toBe("kept");
        }
        expect(await snapshot(store)).toEqual(before);
        expect((await store.claims.get(claim.key))?.receipt).toBeUndefined();
        // The act recorded with a worker is told from the same act without one.
        const withWorker = spendingAct("w-9", "ticket", 5);
        const workerClaim = withWorker.claim as NonNullable<Act["claim"]>;
        const recorded = {
          ...withWorker,
          claim: { key: workerClaim.key, record: { ...workerClaim.record, worker: "pid-1@host" } },
        };
        await store.acts.record(recorded);
        expect(await withdraw(withdrawalOf(withWorker))).toBe("kept");
        expect(await withdraw(withdrawalOf(recorded))).toBe("withdrawn");
        expect(await store.usage.getUsage(NS, "ticket")).toBe(1);
      },
    );

    check(
      "a settled claim is kept: a denial, an exhausted spend, a dispatched act",
      async (store, withdraw) => {
        const key = (id: string) => ({ session: "s", functionCallId: id });
        const denied: Act = {
          claim: { key: key("w-10"), record: { bodyHash: "d".repeat(64), claimedAt: 7 } },
          event: actEvent("w-10", "no_matching_grant"),
        };
        await store.acts.record(denied);
        await store.acts.record(spendingAct("w-11"));
        const exhausted = spendingAct("w-12");
        expect(await store.acts.record(exhausted)).toMatchObject({ recorded: "exhausted" });
        const dispatched = spendingAct("w-13", "other", 5);
        await store.acts.record(dispatched);
        await store.claims.settle(key("w-13"), { status: "dispatched", settledAt: 9 }, { ok: 1 });
        const before = {
          ticket: await snapshot(store),
          other: await store.usage.getUsage(NS, "other"),
        };
        for (const act of [denied, exhausted, dispatched]) {
          expect(await withdraw(withdrawalOf(act))).toBe("kept");
        }
        expect({
          ticket: await snapshot(store),
          other: await store.usage.getUsage(NS, "other"),
        }).toEqual(before);
        expect((await store.claims.get(key("w-10")))?.answer).toEqual({
          status: "denied",
          code: "no_matching_grant",
        });
        expect((await store.claims.get(key("w-13")))?.receipt?.status).toBe("dispatched");
      },
    );

    check("a use already given back is not given back below zero", async (store, withdraw) => {
      const act = spendingAct("w-14");
      await store.acts.record(act);
      if (store.usage.release === undefined) return;
      expect((await store.usage.release(NS, "ticket")).released).toBe(true);
      expect(await withdraw(withdrawalOf(act))).toBe("withdrawn");
      expect(await store.usage.getUsage(NS, "ticket")).toBe(0);
      expect(
        (await store.claims.get({ session: "s", functionCallId: "w-14" }))?.receipt?.status,
      ).toBe("failed");
    });

    check(
      "a bad withdrawal is refused with invalid_input before anything is written",
      async (store, withdraw) => {
        const act = spendingAct("w-15", "ticket", 5);
        await store.acts.record(act);
        const before = await snapshot(store);
        const { claim: _claim, ...unclaimed } = act;
        const good = withdrawalOf(act);
        const cyclic: Record<string, unknown> = {};
        cyclic.self = cyclic;
        const bad: Withdrawal[] = [
          { ...good, act: unclaimed as Withdrawal["act"] },
          { ...good, event: { nope: 1 } as unknown as AuditEvent },
          { ...good, answer: cyclic as unknown as JsonValue },
        ];
        for (const withdrawal of bad)
          await expectCode(() => withdraw(withdrawal), ["invalid_input"]);
        expect(await snapshot(store)).toEqual(before);
      },
    );

    check("hostile call IDs, bodies and workers are withdrawn exactly", async (store, withdraw) => {
      for (const [i, id] of HOSTILE_KEYS.entries()) {
        const base = spendingAct(id, `g-${i}`, 1);
        const claim = base.claim as NonNullable<Act["claim"]>;
        // The ID also as body hash and worker: a record holding NUL, quotes, newlines.
        const record = { ...claim.record, bodyHash: id, worker: id };
        const act = { ...base, claim: { key: claim.key, record } };
        const recorded = await resultOrCode(() => store.acts.record(act), ["invalid_input"]);
        if (!recorded.ok) continue;
        expect(await withdraw(withdrawalOf(act))).toBe("withdrawn");
        expect(await withdraw(withdrawalOf(act))).toBe("kept");
        const held = await store.claims.get(claim.key);
        expect(held).toMatchObject({ bodyHash: id, worker: id, receipt: { status: "failed" } });
        expect(held?.answer).toEqual(answerOf(id));
        expect(await store.usage.getUsage(NS, `g-${i}`)).toBe(0);
      }
      expect(verifyAuditChain(await store.audit.read()).ok).toBe(true);
    });

    check(
      `${RACERS} concurrent withdrawals of one act: one withdraws it`,
      async (store, withdraw) => {
        await store.acts.record(spendingAct("w-16", "ticket", 5));
        const act = spendingAct("w-17", "ticket", 5);
        await store.acts.record(act);
        const results = await Promise.all(
          Array.from({ length: RACERS }, () => withdraw(withdrawalOf(act))),
        );
        expect(results.filter((r) => r === "withdrawn")).toHaveLength(1);
        expect(results.filter((r) => r === "kept")).toHaveLength(RACERS - 1);
        expect(await store.usage.getUsage(NS, "ticket")).toBe(1);
        const events = await store.audit.read();
        expect(events.filter((e) => e.reason === "act_withdrawn")).toHaveLength(1);
        expect(verifyAuditChain(events).ok).toBe(true);
      },
    );

    check(
      `withdrawals racing ${MIXED} new acts on the same grant keep its count exact`,
      async (store, withdraw) => {
        const bound = 10 * MIXED;
        const first = Array.from({ length: MIXED }, (_, i) =>
          spendingAct(`m-${i}`, "ticket", bound),
        );
        for (const act of first) await store.acts.record(act);
        const withdrawn = first.filter((_, i) => i % 2 === 0);
        const results = await Promise.all([
          ...withdrawn.map((act) => withdraw(withdrawalOf(act))),
          ...Array.from({ length: MIXED }, (_, i) =>
            store.acts.record(spendingAct(`n-${i}`, "ticket", bound)),
          ),
        ]);
        expect(results.slice(0, withdrawn.length)).toEqual(withdrawn.map(() => "withdrawn"));
        expect(results.slice(withdrawn.length)).toEqual(
          Array.from({ length: MIXED }, () => expect.objectContaining({ recorded: "event" })),
        );
        expect(await store.usage.getUsage(NS, "ticket")).toBe(2 * MIXED - withdrawn.length);
        const events = await store.audit.read();
        expect(events).toHaveLength(2 * MIXED + withdrawn.length);
        expect(verifyAuditChain(events).ok).toBe(true);
        expect(await store.claims.listInDoubt()).toHaveLength(2 * MIXED - withdrawn.length);
      },
    );
  });
}
