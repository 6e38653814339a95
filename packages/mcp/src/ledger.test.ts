import { hostname } from "node:os";
import { InMemoryClaimStore } from "@tessera/core";
import { describe, expect, it } from "vitest";
import { CallLedger, callKeys, digest } from "./ledger.js";

const NOW = 1_000_000;
const BODY = digest({ name: "t", arguments: {} });

/** A claim left by some gateway process, then the ledger's reading of a duplicate. */
async function duplicateOf(worker: object): Promise<string> {
  const claims = new InMemoryClaimStore();
  const keys = callKeys("p", "key:k");
  await claims.claim(keys.claim, {
    bodyHash: BODY,
    claimedAt: NOW,
    worker: JSON.stringify(worker),
  });
  const found = await new CallLedger(claims).claim(keys, BODY, "trace", NOW, NOW + 1000);
  return found.kind;
}

describe("an unsettled claim: in progress or in doubt", () => {
  const here = `${hostname()}:${process.pid}`;
  it("in progress while its gateway process lives and its deadline has not passed", async () => {
    expect(
      await duplicateOf({ w: `${hostname()}:${process.ppid}`, i: "x", t: "t", d: NOW + 60_000 }),
    ).toBe("in_progress");
  });
  it("in doubt once its deadline has passed", async () => {
    expect(
      await duplicateOf({ w: `${hostname()}:${process.ppid}`, i: "x", t: "t", d: NOW - 1 }),
    ).toBe("in_doubt");
  });
  it("in doubt when its process on this host is gone", async () => {
    expect(
      await duplicateOf({ w: `${hostname()}:2147483646`, i: "x", t: "t", d: NOW + 60_000 }),
    ).toBe("in_doubt");
  });
  it("in doubt when an earlier process had this process's pid (a restarted PID 1)", async () => {
    expect(await duplicateOf({ w: here, i: "an-earlier-instance", t: "t", d: NOW + 60_000 })).toBe(
      "in_doubt",
    );
  });
  it("in doubt when the record is unreadable; another host's live claim is in progress", async () => {
    expect(await duplicateOf({ junk: true })).toBe("in_doubt");
    expect(await duplicateOf({ w: "elsewhere:1", i: "x", t: "t", d: NOW + 60_000 })).toBe(
      "in_progress",
    );
  });
});

describe("the answer, written after the reply", () => {
  /** A claim store whose writes of kept answers take a while (a slow durable store). */
  function slowAnswers(): InMemoryClaimStore {
    const store = new InMemoryClaimStore();
    const claim = store.claim.bind(store);
    store.claim = async (key, record) => {
      if (key.session.startsWith("mcp.result:")) {
        await new Promise((resolve) => setTimeout(resolve, 150));
      }
      return claim(key, record);
    };
    return store;
  }
  const result = { content: [{ type: "text" as const, text: "done" }] };

  it("a duplicate in the same process waits for it and gets the recorded answer", async () => {
    const ledger = new CallLedger(slowAnswers());
    const keys = callKeys("p", "key:k");
    expect((await ledger.claim(keys, BODY, "t", NOW, NOW + 60_000)).kind).toBe("claimed");
    ledger.recordLater(keys, BODY, { kind: "result", result }, "dispatched", NOW);
    const again = await ledger.claim(keys, BODY, "t2", NOW, NOW + 60_000);
    expect(again).toMatchObject({ kind: "recorded", recorded: { kind: "result", result } });
  });

  it("another process meanwhile reads the call in progress; a dead one leaves it in doubt", async () => {
    const store = slowAnswers();
    const keys = callKeys("p", "key:k");
    const first = new CallLedger(store);
    await first.claim(keys, BODY, "t", NOW, NOW + 60_000);
    first.recordLater(keys, BODY, { kind: "result", result }, "dispatched", NOW);
    // A second ledger over the same store stands for another gateway process on this host.
    expect((await new CallLedger(store).claim(keys, BODY, "t2", NOW, NOW + 60_000)).kind).toBe(
      "in_progress",
    );
    await first.drain();
    expect((await new CallLedger(store).claim(keys, BODY, "t3", NOW, NOW + 60_000)).kind).toBe(
      "recorded",
    );
    expect(await store.listInDoubt()).toHaveLength(0);
  });
});

describe("answers written after their replies share a window", () => {
  it("answers recorded turns apart reach the store in one tick; drain writes them at once", async () => {
    const store = new InMemoryClaimStore();
    let turn = 0;
    const written: number[] = [];
    const claim = store.claim.bind(store);
    store.claim = async (key, record) => {
      if (key.session.startsWith("mcp.result:")) written.push(turn);
      return claim(key, record);
    };
    const ledger = new CallLedger(store);
    const result = { content: [{ type: "text" as const, text: "done" }] };
    const a = callKeys("p", "key:a");
    const b = callKeys("p", "key:b");
    await ledger.claim(a, BODY, "t", NOW, NOW + 60_000);
    await ledger.claim(b, BODY, "t", NOW, NOW + 60_000);
    const nextTurn = async () => {
      await new Promise((resolve) => setImmediate(resolve));
      turn++;
    };
    ledger.recordLater(a, BODY, { kind: "result", result }, "dispatched", NOW);
    await nextTurn();
    await nextTurn();
    // Written a turn after its reply, the first answer would be in the store by now.
    expect(written).toEqual([]);
    ledger.recordLater(b, BODY, { kind: "result", result }, "dispatched", NOW);
    await nextTurn();
    await ledger.drain();
    expect(written).toHaveLength(2);
    expect(written[0]).toBe(written[1]);
    expect((await store.get(a.claim))?.receipt?.status).toBe("dispatched");
    expect((await store.get(b.claim))?.receipt?.status).toBe("dispatched");
  });
});
