/**
 * Several bounded grants on one resource, acts in flight at once, on Redis, whose ledger
 * undoes an act whose spend lost (`ActLedger.undoesLostSpends`): the testkit's race (in one
 * process and across four, each on its own key prefix), and what only a batched script can
 * get wrong: a lost spend must leave nothing for the later acts of its batch.
 */
import { type Act, verifyAuditChain } from "@tessera/core";
import { describeSeveralGrantsRace, serviceUrl, spendingAct } from "@tessera/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { openStores } from "../src/index.js";
import { openTestStores, type TestStores } from "./support/redis-test-stores.js";

const url = serviceUrl("TESSERA_REDIS_URL");
/** The namespace of the testkit's acts (`spendingAct`). */
const NS_ACTS = "ns-acts";

/** `spendingAct` without its `exhausted` event: recorded only if its spend wins. */
function spendOrNothing(callId: string, grantId: string): Act {
  const { exhausted: _dropped, ...act } = spendingAct(callId, grantId, 1);
  return act;
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

async function fresh(): Promise<TestStores> {
  const opened = await openTestStores(url as string);
  cleanups.push(opened.close);
  return opened;
}

describeSeveralGrantsRace(
  "Redis",
  url === undefined
    ? undefined
    : async () => {
        const opened = await openTestStores(url);
        return {
          stores: opened.stores,
          processSpec: {
            module: "@tessera/redis",
            exportName: "openStores",
            arg: opened.directUrl,
          },
          close: opened.close,
        };
      },
);

describe.skipIf(!url)("a lost spend in a Redis script batch", () => {
  it("a lost spend leaves nothing for the later acts of its batch, and a ledger that had not seen the counter learns it", async () => {
    const opened = await fresh();
    const { stores } = opened;
    expect(await stores.acts.record(spendOrNothing("first", "ticket"))).toMatchObject({
      status: "recorded",
    });
    // One tick, one batch: a lost spend, a retry of its call ID on another grant (same claim
    // key: it must find the key free), another lost one, a spend with its exhausted event, and
    // a spend on a fresh grant that wins after the lost ones.
    const [lost, retried, lostToo, exhausted, wins] = await Promise.all([
      stores.acts.record(spendOrNothing("x", "ticket")),
      stores.acts.record(spendOrNothing("x", "other")),
      stores.acts.record(spendOrNothing("y", "ticket")),
      stores.acts.record(spendingAct("z", "ticket")),
      stores.acts.record(spendOrNothing("w", "third")),
    ]);
    expect(lost).toEqual({ status: "spend_lost" });
    expect(retried).toEqual({ status: "recorded", recorded: "event", used: 1 });
    expect(lostToo).toEqual({ status: "spend_lost" });
    expect(exhausted).toEqual({ status: "recorded", recorded: "exhausted", used: 1 });
    expect(wins).toEqual({ status: "recorded", recorded: "event", used: 1 });
    expect(await stores.claims.get({ session: "s", functionCallId: "y" })).toBeUndefined();
    expect(await stores.audit.read({ callId: "y" })).toEqual([]);
    expect(await stores.audit.read({ callId: "x" })).toHaveLength(1);
    expect(await stores.usage.getUsage(NS_ACTS, "ticket")).toBe(1);
    expect(await stores.usage.getUsage(NS_ACTS, "other")).toBe(1);
    expect(await stores.usage.getUsage(NS_ACTS, "third")).toBe(1);
    // Another process's ledger takes the spent counter for zero: its script finds it stale,
    // and the act is decided again and lost, nothing written.
    const other = await openStores(opened.directUrl);
    try {
      expect(await other.acts.record(spendOrNothing("v", "ticket"))).toEqual({
        status: "spend_lost",
      });
      expect(await other.claims.get({ session: "s", functionCallId: "v" })).toBeUndefined();
      expect(await other.audit.read({ callId: "v" })).toEqual([]);
      // A taken claim comes before the spend: already_claimed, not spend_lost.
      expect((await other.acts.record(spendOrNothing("x", "ticket"))).status).toBe(
        "already_claimed",
      );
    } finally {
      await other.close();
    }
    const events = await stores.audit.read();
    expect(events).toHaveLength(4);
    expect(verifyAuditChain(events).ok).toBe(true);
  });
});
