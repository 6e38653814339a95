import { type Act, type GrantStore, type GrantVersionCheck, verifyAuditChain } from "@tessera/core";
import { describe, expect } from "vitest";
import { type ActLedgerPorts, NS, spendingAct } from "./act-ledger-fixtures.js";
import { expectCode } from "./errors.js";
import { type OpenedStore, type StoreFactory, suiteCases } from "./factory.js";
import { grantInput } from "./grants-fixtures.js";
import { HOSTILE_KEYS } from "./hostile.js";

/** Acts in flight at once, every other one decided on a version that has moved. */
const MIXED = 16;

/** `act` decided on `versions` (the holder `agent`'s, and any other holder's). */
function checked(act: Act, versions: readonly GrantVersionCheck[]): Act {
  return { ...act, versions };
}

function holder(version: string, subject = "agent"): GrantVersionCheck {
  return { namespaceId: NS, subject, version };
}

/** Adds a grant to `agent` in the suite's namespace: its grant version moves. */
async function addGrant(grants: GrantStore, id: string): Promise<void> {
  await grants.add(grantInput({ id, namespaceId: NS, subject: "agent" }));
}

/** Everything an act would have written, for `callId` and the ticket. */
async function written(store: ActLedgerPorts, callId: string) {
  return {
    claim: await store.claims.get({ session: "s", functionCallId: callId }),
    used: await store.usage.getUsage(NS, "ticket"),
    events: await store.audit.read({ callId }),
  };
}

/**
 * `Act.versions` and `ActLedger.checksVersionsIn`: a ledger that declares the check names its
 * grant store's `versionSpace`, compares each version inside the act's transaction, and an act
 * whose version moved (a grant added or revoked) writes nothing and answers `stale`, alone or
 * beside current acts in one batch. A ledger without the check refuses an act that carries
 * versions (`invalid_input`), writing nothing: it must never record an act on grants nobody
 * checked. Hostile version checks are refused before anything is written either way.
 */
export function describeVersionCheckConformance<H extends OpenedStore<ActLedgerPorts>>(
  name: string,
  factory: StoreFactory<ActLedgerPorts, H>,
): void {
  const { use, check } = suiteCases(factory);

  /**
   * Runs `body` on a ledger that checks versions (with its grant store); on one that does not,
   * checks instead that an act carrying versions is refused and writes nothing.
   */
  const versioned = (body: (store: ActLedgerPorts, grants: GrantStore) => Promise<void>) =>
    use(async ({ store }) => {
      if (store.acts.checksVersionsIn === undefined) {
        await expectCode(
          () => store.acts.record(checked(spendingAct("v-refused"), [holder("0")])),
          ["invalid_input"],
        );
        expect(await written(store, "v-refused")).toEqual({
          claim: undefined,
          used: 0,
          events: [],
        });
        return;
      }
      const grants = store.grants;
      expect(grants, "a ledger that checks versions is tested with its grant store").toBeDefined();
      expect(store.acts.checksVersionsIn).toBe(grants?.versionSpace);
      await body(store, grants as GrantStore);
    });

  describe(`ActLedger version checks: ${name}`, () => {
    check("an act on current versions is recorded; one on a moved version writes nothing", () =>
      versioned(async (store, grants) => {
        await addGrant(grants, "g-1");
        const before = await grants.grantsVersion?.(NS, "agent");
        expect(before).toBeTypeOf("string");
        const current = checked(spendingAct("v-1"), [holder(before as string)]);
        expect(await store.acts.record(current)).toMatchObject({ status: "recorded", used: 1 });

        await addGrant(grants, "g-2");
        const moved = checked(spendingAct("v-2"), [holder(before as string)]);
        expect(await store.acts.record(moved)).toEqual({ status: "stale" });
        expect(await written(store, "v-2")).toEqual({ claim: undefined, used: 1, events: [] });

        // Decided again on the version as it stands, the same act is recorded.
        const after = (await grants.grantsVersion?.(NS, "agent")) as string;
        expect(after).not.toBe(before);
        const again = checked(spendingAct("v-2", "ticket", 2), [holder(after)]);
        expect(await store.acts.record(again)).toMatchObject({ status: "recorded", used: 2 });
      }),
    );

    check("a revocation moves the version: an act decided before it is stale", () =>
      versioned(async (store, grants) => {
        await addGrant(grants, "g-r");
        const before = (await grants.grantsVersion?.(NS, "agent")) as string;
        expect(await grants.revoke(NS, "g-r")).toBe(true);
        const act = checked(spendingAct("v-r"), [holder(before)]);
        expect(await store.acts.record(act)).toEqual({ status: "stale" });
        expect(await written(store, "v-r")).toEqual({ claim: undefined, used: 0, events: [] });
      }),
    );

    check("every holder is checked: one moved among several makes the act stale", () =>
      versioned(async (store, grants) => {
        await addGrant(grants, "g-h");
        const own = (await grants.grantsVersion?.(NS, "agent")) as string;
        // A holder that never held a grant has a version too, and it moves with its first one.
        const parent = (await grants.grantsVersion?.(NS, "parent")) as string;
        const both = [holder(own), holder(parent, "parent")];
        expect(await store.acts.record(checked(spendingAct("v-h1"), both))).toMatchObject({
          status: "recorded",
        });
        await grants.add(grantInput({ id: "g-p", namespaceId: NS, subject: "parent" }));
        const act = checked(spendingAct("v-h2", "ticket", 5), both);
        expect(await store.acts.record(act)).toEqual({ status: "stale" });
        expect(await written(store, "v-h2")).toEqual({ claim: undefined, used: 1, events: [] });
      }),
    );

    check(`${MIXED} acts in flight, every other one stale: each answers for itself`, () =>
      versioned(async (store, grants) => {
        await addGrant(grants, "g-m1");
        const old = (await grants.grantsVersion?.(NS, "agent")) as string;
        await addGrant(grants, "g-m2");
        const now = (await grants.grantsVersion?.(NS, "agent")) as string;
        const acts = Array.from({ length: MIXED }, (_, i) =>
          checked(spendingAct(`v-m${i}`, "ticket", MIXED), [holder(i % 2 === 0 ? now : old)]),
        );
        const results = await Promise.all(acts.map((act) => store.acts.record(act)));
        for (const [i, result] of results.entries()) {
          expect(result.status, `act ${i}`).toBe(i % 2 === 0 ? "recorded" : "stale");
          const claim = await store.claims.get({ session: "s", functionCallId: `v-m${i}` });
          expect(claim === undefined, `claim of act ${i}`).toBe(i % 2 === 1);
          expect(await store.audit.read({ callId: `v-m${i}` })).toHaveLength(i % 2 === 0 ? 1 : 0);
        }
        expect(await store.usage.getUsage(NS, "ticket")).toBe(MIXED / 2);
        expect(verifyAuditChain(await store.audit.read()).ok).toBe(true);
      }),
    );

    check("hostile version checks are refused before anything is written", () =>
      versioned(async (store, grants) => {
        const bad: unknown[] = [
          [holder("")],
          [holder("v".repeat(1_000_000))],
          [{ namespaceId: NS, subject: "agent" }],
          [null],
          "0",
          ...HOSTILE_KEYS.slice(0, 3).map((key) => [{ namespaceId: NS, subject: key, version: 1 }]),
        ];
        for (const versions of bad) {
          const act = { ...spendingAct("v-bad"), versions } as unknown as Act;
          await expectCode(() => store.acts.record(act), ["invalid_input"]);
        }
        expect(await written(store, "v-bad")).toEqual({ claim: undefined, used: 0, events: [] });
        // Hostile IDs are only IDs: a holder named by one is checked like any other.
        for (const key of HOSTILE_KEYS) {
          const version = (await grants.grantsVersion?.(NS, key)) as string;
          const act = checked(spendingAct(`v-${key}`, "ticket", HOSTILE_KEYS.length), [
            holder(version, key),
          ]);
          expect(await store.acts.record(act), key).toMatchObject({ status: "recorded" });
        }
      }),
    );
  });
}
