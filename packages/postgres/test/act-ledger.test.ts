/**
 * The PostgreSQL act ledger's costs and chain, counted at the driver: every statement any pool
 * sends goes through `pg.Client.prototype.query`, so a spy there sees each round trip. A lone
 * act is one statement; acts in flight together are one statement per batch, with nothing
 * else sent (no read-back, no head read, no settle); the events of many concurrent acts, over
 * several streams and two pools at once, form chains that `verifyAuditChain` accepts. A
 * withdrawal is one statement too, whatever it answers.
 */
import { type Act, type AuditEvent, verifyAuditChain } from "@tessera/core";
import { claimKeyDigest, storageDigest } from "@tessera/core/store-kit";
import { actEvent, serviceUrl, spendingAct, withdrawalOf } from "@tessera/testkit";
import pg from "pg";
import { describe, expect, it, vi } from "vitest";
import { openStores } from "../src/index.js";
import { admin, storesPerTest } from "./support/pg-test-stores.js";

const url = serviceUrl("TESSERA_PG_URL");
const suite = url ? describe : describe.skip;
const opened = storesPerTest(url);

/** Every statement sent from now on: its text and how many acts it carried, if a batch. */
function statements(): { readonly texts: () => string[]; readonly acts: () => number[] } {
  const spy = vi.spyOn(pg.Client.prototype, "query");
  const calls = () => spy.mock.calls as unknown as [unknown, unknown[] | undefined][];
  const textOf = (query: unknown) =>
    typeof query === "string" ? query : String((query as { text?: unknown }).text);
  return {
    texts: () => calls().map(([query]) => textOf(query)),
    acts: () =>
      calls()
        .filter(([query]) => textOf(query).includes("record_acts"))
        // A prepared statement travels as one config object with its values inside.
        .map(([query, values]) => {
          const sent =
            typeof query === "string" ? values : (query as { values?: unknown[] }).values;
          return ((sent ?? [])[0] as unknown[]).length;
        }),
  };
}

/** A retry-safe act on `callId` in namespace `ns` spending one use of a roomy grant. */
function actIn(ns: string, callId: string, grantId = "roomy"): Act {
  const base = spendingAct(callId, grantId, 1_000_000);
  const event: AuditEvent = { ...base.event, namespaceId: ns };
  return {
    ...base,
    spend: { namespaceId: ns, grantId, maxUses: 1_000_000 },
    event,
    exhausted: { ...(base.exhausted as AuditEvent), namespaceId: ns },
  };
}

suite("postgres act ledger: statements at the driver", () => {
  it("a lone act is exactly one statement, allowed or denied, with or without a claim", async () => {
    const { stores } = await opened();
    // Warm the pool: a first connection is opened on demand, outside what is counted.
    await stores.acts.record({ event: actEvent("warm", "no_matching_grant") });
    const sent = statements();
    expect((await stores.acts.record(spendingAct("one"))).status).toBe("recorded");
    expect(sent.texts()).toHaveLength(1);
    // A lost spend: the exhausted event and the denied settle ride in the same statement.
    expect(await stores.acts.record(spendingAct("two"))).toEqual({
      status: "recorded",
      recorded: "exhausted",
      used: 1,
    });
    expect(sent.texts()).toHaveLength(2);
    // A claimed call ID: the holder's claim comes back from the same statement.
    expect((await stores.acts.record(spendingAct("one"))).status).toBe("already_claimed");
    expect(sent.texts()).toHaveLength(3);
    // A denial without a call ID.
    await stores.acts.record({ event: actEvent("three", "no_matching_grant") });
    expect(sent.texts()).toHaveLength(4);
    expect(sent.acts()).toEqual([1, 1, 1, 1]);
  });

  it("a withdrawal is exactly one statement, whatever it answers; the sink chains after it", async () => {
    const { stores } = await opened();
    const act = spendingAct("w-1", "ticket", 5);
    await stores.acts.record(act);
    const withdraw = stores.acts.withdraw?.bind(stores.acts);
    if (withdraw === undefined) throw new Error("the PostgreSQL ledger withdraws");
    const sent = statements();
    expect(await withdraw(withdrawalOf(act))).toBe("withdrawn");
    expect(await withdraw(withdrawalOf(act))).toBe("kept");
    expect(await withdraw(withdrawalOf(spendingAct("never")))).toBe("not_recorded");
    const texts = sent.texts();
    expect(texts).toHaveLength(3);
    expect(texts.every((text) => text.includes("withdraw_act"))).toBe(true);
    // The sink's remembered head is stale after the withdrawal moved it: it still links after.
    await stores.audit.append(actEvent("after"));
    const events = await stores.audit.read();
    expect(events.map((event) => [event.reason, event.seq])).toEqual([
      ["allowed", 1],
      ["act_withdrawn", 2],
      ["allowed", 3],
    ]);
    expect(verifyAuditChain(events).ok).toBe(true);
  });

  it("a record spelled otherwise is compared field by field; one holding NUL is kept", async () => {
    const test = await opened();
    const { stores, schema } = test;
    const withdraw = stores.acts.withdraw?.bind(stores.acts);
    if (withdraw === undefined) throw new Error("the PostgreSQL ledger withdraws");
    // Claims as another writer spelled them: keys in another order, whitespace.
    const write = async (id: string, record: Record<string, unknown>) => {
      const key = { session: "s", functionCallId: id };
      await admin(
        url as string,
        `INSERT INTO "${schema}".claims (key, session_key, record, claimed_at) VALUES ($1, $2, $3, $4)`,
        [
          claimKeyDigest(key),
          storageDigest("s"),
          JSON.stringify(record, null, 1),
          1_780_000_000_000,
        ],
      );
    };
    const recordOf = (id: string, worker?: string) => ({
      worker,
      claimedAt: 1_780_000_000_000,
      bodyHash: "b".repeat(64),
      functionCallId: id,
      session: "s",
    });
    await write("spelled", recordOf("spelled", "w"));
    await write("nul", recordOf("nul", "w\u0000"));
    await write("other-worker", recordOf("other-worker", "x"));
    const withWorker = (id: string, worker: string) => {
      const act = spendingAct(id);
      const claim = act.claim as NonNullable<Act["claim"]>;
      return { ...act, claim: { key: claim.key, record: { ...claim.record, worker } } };
    };
    expect(await withdraw(withdrawalOf(withWorker("spelled", "w")))).toBe("withdrawn");
    // jsonb cannot read NUL: such a record, spelled otherwise, is another record, kept.
    expect(await withdraw(withdrawalOf(withWorker("nul", "w\u0000")))).toBe("kept");
    expect(await withdraw(withdrawalOf(withWorker("other-worker", "w")))).toBe("kept");
    expect((await stores.claims.get({ session: "s", functionCallId: "spelled" }))?.receipt).toEqual(
      {
        status: "failed",
        settledAt: Date.parse(withdrawalOf(spendingAct("x")).event.at),
      },
    );
  });

  it("64 acts issued together are exactly one statement", async () => {
    const { stores } = await opened();
    await stores.acts.record({ event: actEvent("warm", "no_matching_grant") });
    const sent = statements();
    const results = await Promise.all(
      Array.from({ length: 64 }, (_, i) => stores.acts.record(actIn(`ns-${i % 3}`, `c-${i}`))),
    );
    expect(results.every((result) => result.status === "recorded")).toBe(true);
    expect(sent.texts()).toHaveLength(1);
    expect(sent.acts()).toEqual([64]);
  });

  it("16 callers acting in a loop: one statement per batch and nothing else", async () => {
    const { stores } = await opened();
    await stores.acts.record({ event: actEvent("warm", "no_matching_grant") });
    const sent = statements();
    await Promise.all(
      Array.from({ length: 16 }, async (_, caller) => {
        for (let i = 0; i < 10; i++) {
          const result = await stores.acts.record(actIn("ns-loop", `l-${caller}-${i}`));
          expect(result.status).toBe("recorded");
        }
      }),
    );
    const batches = sent.acts();
    // Every statement sent was a batch of acts, and every act went in exactly one batch.
    expect(sent.texts()).toHaveLength(batches.length);
    expect(batches.reduce((sum, size) => sum + size, 0)).toBe(160);
    // Shared: two batches are out at most, so 16 callers never need 160 statements.
    expect(batches.length).toBeLessThan(160);
    expect(Math.max(...batches)).toBeGreaterThan(1);
  });
});

suite("postgres act ledger: the chain of concurrent acts", () => {
  it("600 acts over 3 streams from two pools at once, mixed with sink appends, verify", async () => {
    const test = await opened();
    const second = await openStores(test.directUrl);
    try {
      const bundles = [test.stores, second];
      const waves = 5;
      for (let wave = 0; wave < waves; wave++) {
        await Promise.all(
          Array.from({ length: 120 }, (_, i) => {
            const bundle = bundles[i % 2] as typeof second;
            const ns = `ns-${i % 3}`;
            // Every tenth: a plain sink append on the same stream (its remembered head is stale).
            if (i % 10 === 9) {
              return bundle.audit.append({ ...actEvent(`s-${wave}-${i}`), namespaceId: ns });
            }
            return bundle.acts.record(actIn(ns, `w-${wave}-${i}`, `g-${i % 4}`));
          }),
        );
      }
      const events = await test.stores.audit.read();
      expect(events).toHaveLength(600);
      const verified = verifyAuditChain(events);
      expect(verified.ok).toBe(true);
      expect(verified.streams.map((stream) => stream.events).sort()).toEqual([200, 200, 200]);
      for (const stream of verified.streams) expect(stream.head.seq).toBe(200);
      // 540 spends over 4 grants per namespace: each use counted once.
      let used = 0;
      for (let ns = 0; ns < 3; ns++) {
        for (let g = 0; g < 4; g++) used += await test.stores.usage.getUsage(`ns-${ns}`, `g-${g}`);
      }
      expect(used).toBe(540);
    } finally {
      await second.close();
    }
  });

  it("an event as stored keeps its content exactly and reads back linked", async () => {
    const { stores } = await opened();
    const hostile = 'a\u0000b "q" \' ; -- ключ 🔑 \n';
    // A lone surrogate is refused in IDs (UTF-8 cannot hold it) and kept whole in free text.
    const event: AuditEvent = {
      ...actEvent(hostile),
      namespaceId: hostile,
      traceId: hostile,
      chain: ["g-1", hostile],
      detail: `${hostile}\ud800`,
    };
    await stores.acts.record({ event });
    const [stored] = await stores.audit.read({ callId: hostile });
    expect(stored).toEqual({
      ...event,
      seq: 1,
      prev: "0".repeat(64),
      hash: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    expect(verifyAuditChain([stored as AuditEvent]).ok).toBe(true);
  });

  it("64 acts on a grant of 5 issued together: the first 5 issued win, counts 1..5", async () => {
    const { stores } = await opened();
    const sent = statements();
    const results = await Promise.all(
      Array.from({ length: 64 }, (_, i) => stores.acts.record(spendingAct(`five-${i}`, "five", 5))),
    );
    expect(sent.acts()).toEqual([64]);
    expect(results.slice(0, 5)).toEqual(
      [1, 2, 3, 4, 5].map((used) => ({ status: "recorded", recorded: "event", used })),
    );
    for (const result of results.slice(5)) {
      expect(result).toEqual({ status: "recorded", recorded: "exhausted", used: 5 });
    }
    expect(await stores.usage.getUsage("ns-acts", "five")).toBe(5);
    // Mixed bounds on one counter in one batch: each act's own guard, in issue order.
    const mixed = await Promise.all(
      [6, 7, 6, 9].map((max, i) => stores.acts.record(spendingAct(`mix-${i}`, "five", max))),
    );
    expect(mixed.map((result) => (result.status === "recorded" ? result.recorded : ""))).toEqual([
      "event",
      "event",
      "exhausted",
      "event",
    ]);
    expect(await stores.usage.getUsage("ns-acts", "five")).toBe(8);
    expect(verifyAuditChain(await stores.audit.read()).ok).toBe(true);
  });

  it("settles batched together keep their answers; the first per key stands", async () => {
    const { stores } = await opened();
    const keys = Array.from({ length: 8 }, (_, i) => ({ session: "s", functionCallId: `k${i}` }));
    await Promise.all(
      keys.map((key) => stores.acts.record(spendingAct(key.functionCallId, key.functionCallId))),
    );
    await Promise.all([
      ...keys.map((key, i) =>
        stores.claims.settle(key, { status: "dispatched", settledAt: 2 }, { i }),
      ),
      stores.claims.settle(keys[0] as (typeof keys)[0], { status: "failed", settledAt: 3 }, 9),
    ]);
    for (const [i, key] of keys.entries()) {
      expect(await stores.claims.get(key)).toMatchObject({
        receipt: { status: "dispatched", settledAt: 2 },
        answer: { i },
      });
    }
    // A settle without an answer keeps none.
    await stores.acts.record(spendingAct("plain", "other"));
    const plain = { session: "s", functionCallId: "plain" };
    await stores.claims.settle(plain, { status: "dispatched", settledAt: 4 });
    expect(await stores.claims.get(plain)).not.toHaveProperty("answer");
  });
});
