/**
 * `record_acts` takes a batch of one act down a path of its own (schema version 9: single-row
 * statements instead of the batch's set machinery). The two paths must answer and write alike.
 * The same acts are recorded twice: in one store each act alone (a batch of one), in another
 * each beside an act of another namespace issued in the same tick (a batch of two, the batch's
 * path). Both stores must give the same answers and hold the same claims, counters and events,
 * and each trail must verify. The statements at the driver show which path each act took.
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

const keyOf = (callId: string): ClaimKey => ({ session: "s", functionCallId: callId });

/** An act whose decision stood on a holder's grants at `version`. */
function checkedAt(act: Act, version: string): Act {
  return { ...act, versions: [{ namespaceId: NS, subject: "agent", version }] };
}

/** Every case each path must answer alike, in order: later ones meet what earlier ones wrote. */
const SCENARIO: readonly [string, Act][] = [
  ["a new claim spends the ticket's one use", spendingAct("first", "ticket", 1)],
  ["the same call ID again finds its claim", spendingAct("first", "ticket", 1)],
  [
    "another call on the spent ticket records the exhausted event",
    spendingAct("second", "ticket", 1),
  ],
  ["a roomy grant, spent again and again", spendingAct("roomy-1", "roomy", 3)],
  ["… its second use", spendingAct("roomy-2", "roomy", 3)],
  [
    "a denial with a claim settles it with its answer",
    { claim: spendingAct("denied").claim, event: actEvent("denied", "no_matching_grant") },
  ],
  [
    "its retry reads the settled denial back",
    { claim: spendingAct("denied").claim, event: actEvent("denied", "no_matching_grant") },
  ],
  ["an act with neither claim nor spend: the event alone", { event: actEvent("bare") }],
  [
    "a denial with no claim: the event alone",
    { event: actEvent("bare-denied", "no_matching_grant") },
  ],
  [
    'decided on the version the store holds (none: "0")',
    checkedAt(spendingAct("current", "roomy", 3), "0"),
  ],
  [
    "decided on a version that moved: stale, nothing written",
    checkedAt(spendingAct("stale", "roomy", 3), "7.1"),
  ],
  ["the stale call decided again: the last use went meanwhile", spendingAct("stale", "roomy", 3)],
];

/** An act of another namespace, recorded beside a scenario act to make its batch two long. */
function companion(n: number): Act {
  const base = actEvent(`companion-${n}`);
  return { event: { ...base, namespaceId: "ns-companion" } };
}

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
  const sizes = batchSizes();
  const answers: unknown[] = [];
  for (const [n, [, act]] of SCENARIO.entries()) {
    if (batched) {
      const [answer] = await Promise.all([
        stores.stores.acts.record(act),
        stores.stores.acts.record(companion(n)),
      ]);
      answers.push(answer);
    } else {
      answers.push(await stores.stores.acts.record(act));
    }
  }
  expect(sizes()).toEqual(SCENARIO.map(() => (batched ? 2 : 1)));
  vi.restoreAllMocks();
  return answers;
}

/** What the store holds for the scenario: each call's claim, each grant's uses, its events. */
async function holdings(stores: TestStores) {
  const { claims, usage, audit } = stores.stores;
  const callIds = [...new Set(SCENARIO.map(([, act]) => act.claim?.key.functionCallId))];
  const events = (await audit.read()).filter((event) => event.namespaceId === NS);
  const content = ({ seq: _s, prev: _p, hash: _h, ...rest }: AuditEvent) => rest;
  return {
    claims: await Promise.all(
      callIds.filter((id) => id !== undefined).map((id) => claims.get(keyOf(id as string))),
    ),
    uses: {
      ticket: await usage.getUsage(NS, "ticket"),
      roomy: await usage.getUsage(NS, "roomy"),
    },
    events: events.map(content),
    verified: verifyAuditChain(await audit.read()).ok,
  };
}

suite("postgres record_acts: a batch of one answers and writes as a batch of many", () => {
  it("each case alone and beside another act: same answers, same claims, uses and events", async () => {
    const alone = await opened();
    const together = await opened();
    const answersAlone = await recordAll(alone, false);
    const answersTogether = await recordAll(together, true);
    expect(answersAlone).toEqual(answersTogether);
    const held = await holdings(alone);
    expect(held).toEqual(await holdings(together));

    // And what they answered is what each case means, so two wrong paths cannot agree.
    const byCase = Object.fromEntries(SCENARIO.map(([name], i) => [name, answersAlone[i]]));
    expect(Object.values(byCase).map((answer) => (answer as { status: string }).status)).toEqual([
      "recorded",
      "already_claimed",
      "recorded",
      "recorded",
      "recorded",
      "recorded",
      "already_claimed",
      "recorded",
      "recorded",
      "recorded",
      "stale",
      "recorded",
    ]);
    expect(answersAlone[0]).toEqual({ status: "recorded", recorded: "event", used: 1 });
    expect(answersAlone[1]).toMatchObject({
      status: "already_claimed",
      existing: { functionCallId: "first", bodyHash: "b".repeat(64) },
    });
    expect(answersAlone[2]).toEqual({ status: "recorded", recorded: "exhausted", used: 1 });
    expect(answersAlone[4]).toEqual({ status: "recorded", recorded: "event", used: 2 });
    expect(answersAlone[6]).toMatchObject({
      status: "already_claimed",
      existing: { receipt: { status: "denied" } },
    });
    expect(answersAlone[7]).toEqual({ status: "recorded", recorded: "event" });
    expect(answersAlone[11]).toEqual({ status: "recorded", recorded: "exhausted", used: 3 });
    expect(held.uses).toEqual({ ticket: 1, roomy: 3 });
    expect(held.verified).toBe(true);
    // One event per recorded act, none for a found claim or a stale decision.
    expect(held.events.map((event) => [event.callId, event.reason])).toEqual([
      ["first", "allowed"],
      ["second", "grant_exhausted"],
      ["roomy-1", "allowed"],
      ["roomy-2", "allowed"],
      ["denied", "no_capability"],
      ["bare", "allowed"],
      ["bare-denied", "no_capability"],
      ["current", "allowed"],
      ["stale", "grant_exhausted"],
    ]);
  });
});
