import type { Act, ActResult } from "@tessera/core";
import { describe, expect } from "vitest";
import { type ActLedgerPorts, NS, spendingAct } from "./act-ledger-fixtures.js";
import { expectCode } from "./errors.js";
import { type OpenedStore, type StoreFactory, suiteCases } from "./factory.js";

/** Acts racing for the uses of two grants in the concurrency case. */
const RACERS = 48;
/** Uses of each of the two grants: fewer than the racers, so most must lose. */
const USES = 3;

/** `spendingAct` without its `exhausted` event: recorded only if its spend wins. */
function spendOrNothing(callId: string, grantId = "ticket", maxUses = 1): Act {
  const { exhausted: _dropped, ...act } = spendingAct(callId, grantId, maxUses);
  return act;
}

/** Everything an act on `callId` could have written, and the uses of `grantId`. */
async function written(store: ActLedgerPorts, callId: string, grantId = "ticket") {
  return {
    claim: await store.claims.get({ session: "s", functionCallId: callId }),
    used: await store.usage.getUsage(NS, grantId),
    events: await store.audit.read({ callId }),
  };
}

/**
 * `ActLedger.undoesLostSpends`: an act whose spend comes without its `exhausted` event is
 * recorded whole when the spend wins, and writes nothing at all when it loses (no claim, no
 * event, no use), answering `spend_lost`, so the kernel can decide again on another grant.
 * A taken claim still comes first. Acts racing for the uses of two grants, each trying the
 * first and then the second (the kernel's way), spend exactly every use and leave nothing of
 * the acts that lost. A ledger without it refuses such an act (`invalid_input`), writing
 * nothing.
 */
export function describeLostSpendConformance<H extends OpenedStore<ActLedgerPorts>>(
  name: string,
  factory: StoreFactory<ActLedgerPorts, H>,
): void {
  const { use, check } = suiteCases(factory);

  /** Runs `body` on a ledger that undoes lost spends; on another, checks the refusal. */
  const undoing = (body: (store: ActLedgerPorts) => Promise<void>) =>
    use(async ({ store }) => {
      if (store.acts.undoesLostSpends !== true) {
        await expectCode(() => store.acts.record(spendOrNothing("u-refused")), ["invalid_input"]);
        expect(await written(store, "u-refused")).toEqual({
          claim: undefined,
          used: 0,
          events: [],
        });
        return;
      }
      await body(store);
    });

  describe(`ActLedger lost spends: ${name}`, () => {
    check("a spend without its exhausted event is recorded whole when it wins", () =>
      undoing(async (store) => {
        expect(await store.acts.record(spendOrNothing("u-1"))).toEqual({
          status: "recorded",
          recorded: "event",
          used: 1,
        });
        const after = await written(store, "u-1");
        expect(after.claim).toMatchObject({ bodyHash: "b".repeat(64) });
        expect(after.claim?.receipt).toBeUndefined();
        expect(after.used).toBe(1);
        expect(after.events).toHaveLength(1);
        expect(after.events[0]).toMatchObject({ outcome: "allowed", callId: "u-1" });
      }),
    );

    check("one that loses writes nothing: no claim, no event, no use", () =>
      undoing(async (store) => {
        await store.acts.record(spendOrNothing("u-2"));
        const before = await store.audit.read();
        expect(await store.acts.record(spendOrNothing("u-3"))).toEqual({ status: "spend_lost" });
        expect(await written(store, "u-3")).toEqual({ claim: undefined, used: 1, events: [] });
        expect(await store.audit.read()).toEqual(before);
        expect(await store.claims.listInDoubt("s")).toHaveLength(1);
        // The call ID stays free: the same act on a grant with a use left is recorded.
        const next = await store.acts.record(spendOrNothing("u-3", "other-ticket"));
        expect(next).toMatchObject({ status: "recorded", recorded: "event" });
      }),
    );

    check("a taken claim comes first: already_claimed, nothing spent", () =>
      undoing(async (store) => {
        await store.acts.record(spendOrNothing("u-4", "ticket", 5));
        const again = await store.acts.record(spendOrNothing("u-4", "ticket", 5));
        expect(again.status).toBe("already_claimed");
        expect(await written(store, "u-4")).toMatchObject({ used: 1 });
        expect((await written(store, "u-4")).events).toHaveLength(1);
      }),
    );

    check(
      `${RACERS} acts racing for two grants of ${USES} uses, each trying the second when the first is gone: every use spent once, nothing left of the losers`,
      () =>
        undoing(async (store) => {
          const race = async (i: number): Promise<"first" | "second" | "refused"> => {
            const callId = `race-${i}`;
            const first: ActResult = await store.acts.record(spendOrNothing(callId, "g-a", USES));
            if (first.status === "recorded") return "first";
            expect(first).toEqual({ status: "spend_lost" });
            // The last grant carries its exhausted event, as the kernel sends it.
            const second = await store.acts.record(spendingAct(callId, "g-b", USES));
            expect(second.status).toBe("recorded");
            return second.status === "recorded" && second.recorded === "event"
              ? "second"
              : "refused";
          };
          const outcomes = await Promise.all(Array.from({ length: RACERS }, (_, i) => race(i)));
          const count = (kind: string) => outcomes.filter((outcome) => outcome === kind).length;
          expect(count("first")).toBe(USES);
          expect(count("second")).toBe(USES);
          expect(count("refused")).toBe(RACERS - 2 * USES);
          expect(await store.usage.getUsage(NS, "g-a")).toBe(USES);
          expect(await store.usage.getUsage(NS, "g-b")).toBe(USES);
          const events = await store.audit.read();
          // One event per act: the allowed ones and the refusals on the last grant; none for
          // the attempts on the first grant that lost.
          expect(events).toHaveLength(RACERS);
          expect(events.filter((event) => event.outcome === "allowed")).toHaveLength(2 * USES);
          // The allowed acts' claims wait for their answers; every refused one is settled.
          expect(await store.claims.listInDoubt("s")).toHaveLength(2 * USES);
        }),
    );
  });
}
