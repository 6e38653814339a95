/**
 * `record_acts` (schema version 10) undoes an act whose spend lost when it came without its
 * exhausted event (`ActLedger.undoesLostSpends`), inside a batch of many acts. Phase 1 inserts
 * each key for its first act of the batch and holds the later ones back as already claimed; an
 * act undone in phase 2 must leave no claim, so its key passes to the batch's next act of the
 * same key, which goes on as if it had found the key free (as it would have, one act after the
 * other), or the claim row is deleted when there is none. The same acts recorded one by one in
 * another store must give the same answers and leave the same claims, counters and events.
 */
import { type Act, type AuditEvent, type ClaimKey, verifyAuditChain } from "@tessera/core";
import { actEvent, serviceUrl, spendingAct } from "@tessera/testkit";
import pg from "pg";
import { describe, expect, it, vi } from "vitest";
import { storesPerTest, type TestStores } from "./support/pg-test-stores.js";

const url = serviceUrl("TESSERA_PG_URL");
const suite = url ? describe : describe.skip;
const opened = storesPerTest(url);
const NS = "ns-acts";
const ROOMY = 9;

const keyOf = (callId: string): ClaimKey => ({ session: "s", functionCallId: callId });

/** An act on `grantId` whose claim's record is told apart by `mark` (its body hash). */
function act(callId: string, grantId: string, mark: string, undo: boolean): Act {
  const base = spendingAct(callId, grantId, grantId === "gone" ? 1 : ROOMY);
  const claim = { key: keyOf(callId), record: { bodyHash: mark.repeat(64), claimedAt: 1 } };
  const event = { ...actEvent(callId), grantId };
  if (undo) return { claim, spend: base.spend, event };
  return { ...base, claim, event, exhausted: { ...(base.exhausted as AuditEvent), grantId } };
}

/** Recorded one by one before the batch: "gone" has no use left, "held" is claimed. */
const BEFORE: readonly Act[] = [act("pre", "gone", "0", false), act("held", "roomy", "0", false)];

/** The batch, in arrival order: [what it shows, the act]. */
const BATCH: readonly [string, Act][] = [
  ["undone: its claim passes on", act("dup", "gone", "1", true)],
  ["the heir, an ordinary act, claims and spends", act("dup", "roomy", "2", false)],
  ["a third of the key finds the heir's claim", act("dup", "roomy", "3", true)],
  ["undone alone: its claim deleted", act("solo", "gone", "1", true)],
  ["undone, key to the next", act("chain", "gone", "1", true)],
  ["undone again, key to the next", act("chain", "gone", "2", true)],
  [
    "a denial without a spend inherits the key and settles it",
    {
      claim: { key: keyOf("chain"), record: { bodyHash: "3".repeat(64), claimedAt: 1 } },
      event: actEvent("chain", "no_matching_grant"),
    },
  ],
  ["then the key is held (settled denied)", act("chain", "roomy", "4", true)],
  ["a key held before the batch comes first", act("held", "gone", "1", true)],
  ["undone, its heir spends", act("heir", "gone", "1", true)],
  ["the heir of an undone act, undoing too, wins its spend", act("heir", "roomy", "2", true)],
  ["a spend that wins, nothing to undo", act("win", "roomy", "1", true)],
  [
    "undone without a claim: nothing at all",
    { spend: { namespaceId: NS, grantId: "gone", maxUses: 1 }, event: actEvent("bare") },
  ],
];

const CALLS = ["pre", "held", "dup", "solo", "chain", "heir", "win"];

/** How many acts each `record_acts` statement sent from now on carried. */
function batchSizes(): () => number[] {
  const spy = vi.spyOn(pg.Client.prototype, "query");
  return () =>
    (spy.mock.calls as unknown as [unknown, unknown[] | undefined][])
      .filter(([query]) => JSON.stringify(query).includes("record_acts"))
      .map(([query, values]) => {
        const sent = typeof query === "string" ? values : (query as { values?: unknown[] }).values;
        return ((sent ?? [])[0] as unknown[]).length;
      });
}

async function recordAll(stores: TestStores, batched: boolean): Promise<unknown[]> {
  for (const before of BEFORE) await stores.stores.acts.record(before);
  const sizes = batchSizes();
  let answers: unknown[];
  if (batched) {
    answers = await Promise.all(BATCH.map(([, each]) => stores.stores.acts.record(each)));
  } else {
    answers = [];
    for (const [, each] of BATCH) answers.push(await stores.stores.acts.record(each));
  }
  expect(sizes()).toEqual(batched ? [BATCH.length] : BATCH.map(() => 1));
  vi.restoreAllMocks();
  return answers;
}

/** What the store holds: each call's claim, each grant's uses, the events' content. */
async function holdings(stores: TestStores) {
  const { claims, usage, audit } = stores.stores;
  const events = await audit.read();
  const content = ({ seq: _s, prev: _p, hash: _h, ...rest }: AuditEvent) => rest;
  return {
    claims: await Promise.all(CALLS.map((id) => claims.get(keyOf(id)))),
    inDoubt: (await claims.listInDoubt("s")).map((claim) => claim.functionCallId).sort(),
    uses: { gone: await usage.getUsage(NS, "gone"), roomy: await usage.getUsage(NS, "roomy") },
    events: events.map(content),
    verified: verifyAuditChain(events).ok,
  };
}

suite("postgres record_acts: lost spends undone inside a batch", () => {
  it("one batch answers and writes as the same acts one by one, claims passed on exactly", async () => {
    const serial = await opened();
    const batch = await opened();
    const answersSerial = await recordAll(serial, false);
    const answersBatch = await recordAll(batch, true);
    expect(answersBatch).toEqual(answersSerial);
    const held = await holdings(serial);
    expect(await holdings(batch)).toEqual(held);

    // And what they answered is what each case means, so two wrong paths cannot agree.
    const hashOf = (answer: unknown) =>
      (answer as { existing: { bodyHash: string } }).existing.bodyHash[0];
    expect(answersBatch.map((answer) => (answer as { status: string }).status)).toEqual([
      "spend_lost",
      "recorded",
      "already_claimed",
      "spend_lost",
      "spend_lost",
      "spend_lost",
      "recorded",
      "already_claimed",
      "already_claimed",
      "spend_lost",
      "recorded",
      "recorded",
      "spend_lost",
    ]);
    expect(answersBatch[1]).toEqual({ status: "recorded", recorded: "event", used: 2 });
    expect(hashOf(answersBatch[2])).toBe("2");
    expect(answersBatch[6]).toEqual({ status: "recorded", recorded: "event" });
    expect(answersBatch[7]).toMatchObject({
      status: "already_claimed",
      existing: { bodyHash: "3".repeat(64), receipt: { status: "denied" } },
    });
    expect(hashOf(answersBatch[8])).toBe("0");
    expect(answersBatch[10]).toEqual({ status: "recorded", recorded: "event", used: 3 });
    expect(answersBatch[11]).toEqual({ status: "recorded", recorded: "event", used: 4 });

    const [pre, heldClaim, dup, solo, chain, heir, win] = held.claims;
    expect(pre?.bodyHash[0]).toBe("0");
    expect(heldClaim?.bodyHash[0]).toBe("0");
    expect(dup?.bodyHash[0]).toBe("2");
    expect(solo).toBeUndefined();
    expect(chain).toMatchObject({ bodyHash: "3".repeat(64), receipt: { status: "denied" } });
    expect(heir?.bodyHash[0]).toBe("2");
    expect(win?.bodyHash[0]).toBe("1");
    expect(held.inDoubt).toEqual(["dup", "heir", "held", "pre", "win"]);
    expect(held.uses).toEqual({ gone: 1, roomy: 4 });
    expect(held.verified).toBe(true);
    // One event per recorded act, none for an undone one or a found claim.
    expect(held.events.map((event) => [event.callId, event.grantId, event.reason])).toEqual([
      ["pre", "gone", "allowed"],
      ["held", "roomy", "allowed"],
      ["dup", "roomy", "allowed"],
      ["chain", "ticket", "no_capability"],
      ["heir", "roomy", "allowed"],
      ["win", "roomy", "allowed"],
    ]);
  });

  it("a batch whose only act of a key is undone, beside others: that claim is gone, the call ID free", async () => {
    const { stores } = await opened();
    await stores.acts.record(act("pre", "gone", "0", false));
    const [lost, other] = await Promise.all([
      stores.acts.record(act("free", "gone", "1", true)),
      stores.acts.record(act("other", "roomy", "1", true)),
    ]);
    expect(lost).toEqual({ status: "spend_lost" });
    expect(other).toEqual({ status: "recorded", recorded: "event", used: 1 });
    expect(await stores.claims.get(keyOf("free"))).toBeUndefined();
    expect(await stores.acts.record(act("free", "roomy", "2", true))).toEqual({
      status: "recorded",
      recorded: "event",
      used: 2,
    });
    expect((await stores.claims.get(keyOf("free")))?.bodyHash[0]).toBe("2");
  });
});
