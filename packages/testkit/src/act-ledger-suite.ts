import { type Act, type ActResult, type AuditEvent, verifyAuditChain } from "@tessera/core";
import { describe, expect } from "vitest";
import { type ActLedgerPorts, actEvent, NS, spendingAct } from "./act-ledger-fixtures.js";
import { describeLostSpendConformance } from "./act-ledger-lost-spends.js";
import { describeVersionCheckConformance } from "./act-ledger-versions.js";
import { describeWithdrawConformance } from "./act-ledger-withdraw.js";
import { expectCode, resultOrCode } from "./errors.js";
import { type OpenedStore, type StoreFactory, suiteCases } from "./factory.js";
import { HOSTILE_KEYS } from "./hostile.js";

/** Acts racing for one ticket in the concurrency cases. */
const RACERS = 64;
const UNAVAILABLE = [
  "store_unavailable",
  "claim_store_unavailable",
  "usage_store_unavailable",
  "audit_unavailable",
];

async function eventsOf(ports: ActLedgerPorts, callId: string): Promise<readonly AuditEvent[]> {
  return ports.audit.read({ callId });
}

/**
 * The `ActLedger` contract: an act (claim, spend, event) is recorded all or nothing; a taken
 * claim writes nothing else; a lost spend records the exhausted event and spends nothing; a
 * denial's claim is settled `denied` with its refusal as the answer, in the same write; one
 * winner among 64 concurrent acts on one ticket, with one event each and a chain that
 * verifies; a settled answer reads back from the claim a retry collides with; after an
 * outage no half-act is left (a claim, a spend and an event are all there or none is). The
 * optional `withdraw` is checked too (`act-ledger-withdraw.ts`), its cases skipped, saying so,
 * on a ledger without it.
 */
export function describeActLedgerConformance<H extends OpenedStore<ActLedgerPorts>>(
  name: string,
  factory: StoreFactory<ActLedgerPorts, H>,
): void {
  const { use, check, outageCase, outageNote } = suiteCases(factory);

  describe(`ActLedger conformance: ${name}`, () => {
    check("records claim, spend and event of an allowed act together", () =>
      use(async ({ store }) => {
        const act = spendingAct("a-1");
        expect(await store.acts.record(act)).toEqual({
          status: "recorded",
          recorded: "event",
          used: 1,
        });
        expect(await store.usage.getUsage(NS, "ticket")).toBe(1);
        const claim = await store.claims.get({ session: "s", functionCallId: "a-1" });
        expect(claim).toMatchObject({ bodyHash: "b".repeat(64), claimedAt: 1_780_000_000_000 });
        // Allowed: nothing has run yet, so the claim stays open until the caller settles it.
        expect(claim?.receipt).toBeUndefined();
        const events = await eventsOf(store, "a-1");
        expect(events).toHaveLength(1);
        expect(events[0]).toMatchObject({ outcome: "allowed", reason: "allowed", seq: 1 });
      }),
    );

    check("a claimed call ID writes nothing more and hands back the claim with its answer", () =>
      use(async ({ store }) => {
        const key = { session: "s", functionCallId: "a-2" };
        await store.acts.record(spendingAct("a-2", "ticket", 5));
        await store.claims.settle(
          key,
          { status: "dispatched", settledAt: 1_780_000_000_100 },
          { messageId: "m-1", reply: { ok: true, items: [1, "two", null] } },
        );
        const again = await store.acts.record(spendingAct("a-2", "ticket", 5));
        expect(again.status).toBe("already_claimed");
        if (again.status !== "already_claimed") return;
        expect(again.existing.receipt).toEqual({
          status: "dispatched",
          settledAt: 1_780_000_000_100,
        });
        expect(again.existing.answer).toEqual({
          messageId: "m-1",
          reply: { ok: true, items: [1, "two", null] },
        });
        expect(await store.usage.getUsage(NS, "ticket")).toBe(1);
        expect(await eventsOf(store, "a-2")).toHaveLength(1);
      }),
    );

    check("the first settle stands, answer included", () =>
      use(async ({ store }) => {
        const key = { session: "s", functionCallId: "a-3" };
        await store.acts.record(spendingAct("a-3"));
        await store.claims.settle(key, { status: "dispatched", settledAt: 1 }, { first: true });
        await store.claims.settle(key, { status: "failed", settledAt: 2 }, { first: false });
        const claim = await store.claims.get(key);
        expect(claim?.receipt).toEqual({ status: "dispatched", settledAt: 1 });
        expect(claim?.answer).toEqual({ first: true });
      }),
    );

    check(
      "a lost spend records the exhausted event, spends nothing and settles the claim denied",
      () =>
        use(async ({ store }) => {
          expect((await store.acts.record(spendingAct("b-1"))).status).toBe("recorded");
          const lost = await store.acts.record(spendingAct("b-2"));
          expect(lost).toEqual({ status: "recorded", recorded: "exhausted", used: 1 });
          expect(await store.usage.getUsage(NS, "ticket")).toBe(1);
          const events = await eventsOf(store, "b-2");
          expect(events).toHaveLength(1);
          expect(events[0]).toMatchObject({ outcome: "denied", reason: "grant_exhausted" });
          const claim = await store.claims.get({ session: "s", functionCallId: "b-2" });
          expect(claim?.receipt?.status).toBe("denied");
          expect(claim?.answer).toEqual({ status: "denied", code: "tool_unavailable" });
          expect(await store.claims.listInDoubt("s")).toEqual([
            expect.objectContaining({ functionCallId: "b-1" }),
          ]);
        }),
    );

    check(
      "a denial with a claim is settled denied in the same write; without one, only its event",
      () =>
        use(async ({ store }) => {
          const key = { session: "s", functionCallId: "c-1" };
          const denied: Act = {
            claim: { key, record: { bodyHash: "c".repeat(64), claimedAt: 5 } },
            event: actEvent("c-1", "no_matching_grant"),
          };
          expect(await store.acts.record(denied)).toEqual({
            status: "recorded",
            recorded: "event",
          });
          const claim = await store.claims.get(key);
          expect(claim?.receipt?.status).toBe("denied");
          expect(claim?.answer).toEqual({ status: "denied", code: "no_matching_grant" });
          expect(await store.acts.record({ event: actEvent("c-2", "no_matching_grant") })).toEqual({
            status: "recorded",
            recorded: "event",
          });
          expect(await eventsOf(store, "c-2")).toHaveLength(1);
          expect(await store.claims.listInDoubt()).toEqual([]);
        }),
    );

    check(`${RACERS} concurrent acts on one ticket: one spends it, every act has one event`, () =>
      use(async ({ store }) => {
        const results = await Promise.all(
          Array.from({ length: RACERS }, (_, i) => store.acts.record(spendingAct(`r-${i}`))),
        );
        const won = results.filter(
          (r): r is Extract<ActResult, { status: "recorded" }> =>
            r.status === "recorded" && r.recorded === "event",
        );
        expect(won).toHaveLength(1);
        expect(results.filter((r) => r.status === "recorded")).toHaveLength(RACERS);
        expect(await store.usage.getUsage(NS, "ticket")).toBe(1);
        const events = await store.audit.read();
        expect(events).toHaveLength(RACERS);
        expect(events.filter((e) => e.outcome === "allowed")).toHaveLength(1);
        expect(verifyAuditChain(events).ok).toBe(true);
      }),
    );

    check(`${RACERS} concurrent acts with one call ID: one is recorded, the rest collide`, () =>
      use(async ({ store }) => {
        const results = await Promise.all(
          Array.from({ length: RACERS }, () => store.acts.record(spendingAct("same", "t", 100))),
        );
        expect(results.filter((r) => r.status === "recorded")).toHaveLength(1);
        expect(results.filter((r) => r.status === "already_claimed")).toHaveLength(RACERS - 1);
        expect(await store.usage.getUsage(NS, "t")).toBe(1);
        expect(await eventsOf(store, "same")).toHaveLength(1);
      }),
    );

    check("a bad act is refused with invalid_input before anything is written", () =>
      use(async ({ store }) => {
        // A spend without its exhausted event is refused by a ledger that does not undo lost
        // spends (act-ledger-lost-spends.ts checks both kinds).
        const allowedExhausted = { ...spendingAct("bad-2"), exhausted: actEvent("bad-2") };
        await expectCode(() => store.acts.record(allowedExhausted), ["invalid_input"]);
        const badEvent = { ...spendingAct("bad-3"), event: { nope: 1 } as unknown as AuditEvent };
        await expectCode(() => store.acts.record(badEvent), ["invalid_input"]);
        const badMax = spendingAct("bad-4", "ticket", 0);
        await expectCode(() => store.acts.record(badMax), ["invalid_input"]);
        expect(await store.claims.listInDoubt()).toEqual([]);
        expect(await store.audit.read()).toEqual([]);
        expect(await store.usage.getUsage(NS, "ticket")).toBe(0);
        await expectCode(
          () =>
            store.claims.settle(
              { session: "s", functionCallId: "none" },
              {
                status: "dispatched",
                settledAt: 1,
              },
            ),
          ["invalid_input"],
        );
      }),
    );

    check("hostile call IDs and answers are kept apart and read back exactly", () =>
      use(async ({ store }) => {
        for (const [i, id] of HOSTILE_KEYS.entries()) {
          const act = spendingAct(id, `g-${i}`, 1);
          const result = await resultOrCode(() => store.acts.record(act), ["invalid_input"]);
          if (!result.ok) continue;
          expect(result.value.status).toBe("recorded");
          const key = { session: "s", functionCallId: id };
          await store.claims.settle(key, { status: "dispatched", settledAt: 1 }, { id });
          expect((await store.claims.get(key))?.answer).toEqual({ id });
        }
        const cyclic: Record<string, unknown> = {};
        cyclic.self = cyclic;
        await store.acts.record(spendingAct("cyclic", "g-cyclic"));
        await expectCode(
          () =>
            store.claims.settle(
              { session: "s", functionCallId: "cyclic" },
              { status: "dispatched", settledAt: 1 },
              cyclic as never,
            ),
          ["invalid_input"],
        );
      }),
    );

    outageCase(
      `an outage leaves whole acts or none, and a retry gets a decision${outageNote}`,
      () =>
        use(async (opened) => {
          const { store } = opened;
          const control = factory.outage?.(opened);
          if (control === undefined) return;
          await control.interrupt();
          const during = await Promise.all(
            Array.from({ length: 8 }, (_, i) =>
              resultOrCode(() => store.acts.record(spendingAct(`o-${i}`, `o-${i}`)), UNAVAILABLE),
            ),
          );
          if (control.kind !== "blip") {
            expect(during.every((r) => !r.ok)).toBe(true);
          }
          await control.restore();
          for (let i = 0; i < 8; i++) {
            const key = { session: "s", functionCallId: `o-${i}` };
            const claim = await store.claims.get(key);
            const events = await eventsOf(store, `o-${i}`);
            const used = await store.usage.getUsage(NS, `o-${i}`);
            // All or nothing: claim, spend and event together.
            expect([claim !== undefined, events.length, used]).toEqual(
              claim === undefined ? [false, 0, 0] : [true, 1, 1],
            );
            const retry = await store.acts.record(spendingAct(`o-${i}`, `o-${i}`));
            expect(retry.status).toBe(claim === undefined ? "recorded" : "already_claimed");
          }
        }),
    );
  });

  describeWithdrawConformance(name, factory);
  describeVersionCheckConformance(name, factory);
  describeLostSpendConformance(name, factory);
}
