import { hostname } from "node:os";
import { type ClaimStore, InMemoryClaimStore, type StoredClaim, TesseraError } from "@tessera/core";
import { describe, expect, it } from "vitest";
import { type CallKeys, callKeys, digest } from "./call-keys.js";
import { CallLedger, type Duplicate } from "./ledger.js";
import type { StoreFailure } from "./store-failures.js";

const NOW = 1_000_000;
const BODY = digest({ name: "t", arguments: {} });

/** What an act does with the call's claim: claims it, or answers the duplicate. */
async function act(
  ledger: CallLedger,
  store: ClaimStore,
  keys: CallKeys,
  trace: string,
  deadline = NOW + 60_000,
  body = BODY,
): Promise<{ readonly kind: "claimed" } | Duplicate> {
  const claim = ledger.claimOf(keys, body, trace, NOW, deadline);
  const result = await store.claim(claim.key, claim.record);
  if (result.status === "claimed") return { kind: "claimed" };
  return ledger.duplicateOf(keys, body, result.existing, NOW);
}

/** A claim left by some gateway process, then the ledger's reading of a duplicate. */
async function duplicateOf(worker: object): Promise<string> {
  const claims = new InMemoryClaimStore();
  const keys = callKeys("p", "key:k");
  await claims.claim(keys.claim, {
    bodyHash: BODY,
    claimedAt: NOW,
    worker: JSON.stringify(worker),
  });
  return (await act(new CallLedger(claims), claims, keys, "trace", NOW + 1000)).kind;
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
  /** A claim store whose settles (the kept answers) take a while (a slow durable store). */
  function slowAnswers(): InMemoryClaimStore {
    const store = new InMemoryClaimStore();
    const settle = store.settle.bind(store);
    store.settle = async (key, receipt, answer) => {
      await new Promise((resolve) => setTimeout(resolve, 150));
      return settle(key, receipt, answer);
    };
    return store;
  }
  const result = { content: [{ type: "text" as const, text: "done" }] };

  it("a duplicate in the same process waits for it and gets the recorded answer", async () => {
    const store = slowAnswers();
    const ledger = new CallLedger(store);
    const keys = callKeys("p", "key:k");
    expect((await act(ledger, store, keys, "t")).kind).toBe("claimed");
    ledger.settleLater(keys, "call-1", { kind: "result", result }, "dispatched", NOW);
    const again = await act(ledger, store, keys, "t2");
    expect(again).toMatchObject({ kind: "recorded", recorded: { kind: "result", result } });
  });

  it("a duplicate whose act read the claim before the answer landed gets the answer, not in progress", async () => {
    const store = new InMemoryClaimStore();
    const ledger = new CallLedger(store);
    const keys = callKeys("p", "key:k");
    expect((await act(ledger, store, keys, "t")).kind).toBe("claimed");
    // The duplicate's act read the claim unsettled (a durable store's act then waits for its
    // fsync); the answer was written, and left the ledger's pending set, in between.
    const readByTheAct = await store.get(keys.claim);
    ledger.settleLater(keys, "call-1", { kind: "result", result }, "dispatched", NOW);
    await ledger.drain();
    const again = await ledger.duplicateOf(keys, BODY, readByTheAct as StoredClaim, NOW);
    expect(again).toMatchObject({ kind: "recorded", recorded: { kind: "result", result } });
  });

  it("another process meanwhile reads the call in progress; a dead one leaves it in doubt", async () => {
    const store = slowAnswers();
    const keys = callKeys("p", "key:k");
    const first = new CallLedger(store);
    await act(first, store, keys, "t");
    first.settleLater(keys, "call-1", { kind: "result", result }, "dispatched", NOW);
    // A second ledger over the same store stands for another gateway process on this host.
    expect((await act(new CallLedger(store), store, keys, "t2")).kind).toBe("in_progress");
    await first.drain();
    expect((await act(new CallLedger(store), store, keys, "t3")).kind).toBe("recorded");
    expect(await store.listInDoubt()).toHaveLength(0);
  });
});

describe("where the answer lives", () => {
  const result = { content: [{ type: "text" as const, text: "done" }] };

  it("in the claim's own answer field, settled with its receipt: no second key", async () => {
    const store = new InMemoryClaimStore();
    const ledger = new CallLedger(store);
    const keys = callKeys("p", "key:k");
    await act(ledger, store, keys, "t");
    ledger.settleLater(keys, "call-1", { kind: "result", result }, "dispatched", NOW);
    await ledger.drain();
    const stored = await store.get(keys.claim);
    expect(stored?.receipt?.status).toBe("dispatched");
    expect(stored?.answer).toEqual({ kind: "result", result });
    // The worker field keeps who claimed (for in-doubt listings), never the answer.
    expect(stored?.worker).not.toContain("done");
    expect(await store.get(keys.legacy)).toBeUndefined();
  });

  it("a refusal settled by the act ledger ({ status, code }) replays as that refusal", async () => {
    const store = new InMemoryClaimStore();
    const ledger = new CallLedger(store);
    const keys = callKeys("p", "key:k");
    await act(ledger, store, keys, "t");
    await store.settle(
      keys.claim,
      { status: "denied", settledAt: NOW },
      { status: "denied", code: "tool_unavailable" },
    );
    expect(await act(ledger, store, keys, "t2")).toMatchObject({
      kind: "recorded",
      recorded: { kind: "denied", code: "tool_unavailable" },
    });
  });

  it("a call recorded by the previous release (answer under its second key) still replays", async () => {
    const store = new InMemoryClaimStore();
    const keys = callKeys("p", "key:old");
    const old = { bodyHash: BODY, claimedAt: NOW };
    await store.claim(keys.claim, { ...old, worker: JSON.stringify({ w: "h:1", t: "t", d: NOW }) });
    await store.claim(keys.legacy, { ...old, worker: JSON.stringify({ kind: "result", result }) });
    await store.settle(keys.legacy, { status: "dispatched", settledAt: NOW });
    await store.settle(keys.claim, { status: "dispatched", settledAt: NOW });
    expect(await act(new CallLedger(store), store, keys, "t2")).toMatchObject({
      kind: "recorded",
      recorded: { kind: "result", result },
    });
  });

  it("a call in doubt stays unsettled (listed) and reads in doubt in its own process at once", async () => {
    const store = new InMemoryClaimStore();
    const ledger = new CallLedger(store);
    const keys = callKeys("p", "key:k");
    await act(ledger, store, keys, "t");
    ledger.settleLater(keys, "call-1", { kind: "in_doubt", message: "no answer" }, undefined, NOW);
    await ledger.drain();
    expect(await store.listInDoubt()).toHaveLength(1);
    expect((await act(ledger, store, keys, "t2")).kind).toBe("in_doubt");
  });
});

describe("answers written after their replies share a window", () => {
  it("answers recorded turns apart reach the store in one tick; drain writes them at once", async () => {
    const store = new InMemoryClaimStore();
    let turn = 0;
    const written: number[] = [];
    const settle = store.settle.bind(store);
    store.settle = async (key, receipt, answer) => {
      written.push(turn);
      return settle(key, receipt, answer);
    };
    const ledger = new CallLedger(store);
    const result = { content: [{ type: "text" as const, text: "done" }] };
    const a = callKeys("p", "key:a");
    const b = callKeys("p", "key:b");
    await act(ledger, store, a, "t");
    await act(ledger, store, b, "t");
    const nextTurn = async () => {
      await new Promise((resolve) => setImmediate(resolve));
      turn++;
    };
    ledger.settleLater(a, "call-1", { kind: "result", result }, "dispatched", NOW);
    await nextTurn();
    await nextTurn();
    // Written a turn after its reply, the first answer would be in the store by now.
    expect(written).toEqual([]);
    ledger.settleLater(b, "call-1", { kind: "result", result }, "dispatched", NOW);
    await nextTurn();
    await ledger.drain();
    expect(written).toHaveLength(2);
    expect(written[0]).toBe(written[1]);
    expect((await store.get(a.claim))?.receipt?.status).toBe("dispatched");
    expect((await store.get(b.claim))?.receipt?.status).toBe("dispatched");
  });
});

describe("an answer whose settle the store refused (a blip)", () => {
  const result = { content: [{ type: "text" as const, text: "done" }] };
  const retry = { firstDelayMs: 20, maxDelayMs: 40, giveUpAfterMs: 200 };

  /** A claim store whose settles fail while `down` says so. */
  function blipping(): {
    store: InMemoryClaimStore;
    down: { value: boolean };
    tries: () => number;
  } {
    const store = new InMemoryClaimStore();
    const down = { value: true };
    let tries = 0;
    const settle = store.settle.bind(store);
    store.settle = async (key, receipt, answer) => {
      tries++;
      if (down.value) throw new TesseraError("claim_store_unavailable", "the store blipped");
      return settle(key, receipt, answer);
    };
    return { store, down, tries: () => tries };
  }

  async function until(done: () => Promise<boolean> | boolean): Promise<void> {
    for (let i = 0; i < 200 && !(await done()); i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  it("is tried again until the store takes it; its own duplicates get the answer meanwhile, never in progress", async () => {
    const { store, down } = blipping();
    const failures: StoreFailure[] = [];
    const ledger = new CallLedger(store, {
      settleRetry: retry,
      onStoreFailure: (f) => failures.push(f),
    });
    const keys = callKeys("p", "key:k");
    await act(ledger, store, keys, "t");
    ledger.settleLater(keys, "call-1", { kind: "result", result }, "dispatched", NOW);
    await until(() => failures.length > 0);
    expect(failures[0]).toMatchObject({
      write: "answer",
      callId: "call-1",
      code: "claim_store_unavailable",
    });
    expect(await act(ledger, store, keys, "t2")).toMatchObject({
      kind: "recorded",
      recorded: { kind: "result", result },
    });
    down.value = false;
    await until(async () => (await store.get(keys.claim))?.receipt !== undefined);
    const stored = await store.get(keys.claim);
    expect(stored?.receipt?.status).toBe("dispatched");
    expect(stored?.answer).toEqual({ kind: "result", result });
    // Kept: another process reads the answer from the store.
    expect(await act(new CallLedger(store), store, keys, "t3")).toMatchObject({
      kind: "recorded",
      recorded: { kind: "result", result },
    });
    expect(failures).toHaveLength(1);
    await ledger.drain();
  });

  it("is given up after a while: the claim stays unsettled (listed) and its own duplicates read it in doubt", async () => {
    const { store, tries } = blipping();
    const failures: StoreFailure[] = [];
    const ledger = new CallLedger(store, {
      settleRetry: retry,
      onStoreFailure: (f) => failures.push(f),
    });
    const keys = callKeys("p", "key:k");
    await act(ledger, store, keys, "t");
    ledger.settleLater(keys, "call-1", { kind: "result", result }, "dispatched", NOW);
    await until(() => failures.length >= 2);
    expect(failures[1]?.detail).toContain("no longer tried");
    const triesWhenGivenUp = tries();
    expect(triesWhenGivenUp).toBeGreaterThan(2);
    expect((await act(ledger, store, keys, "t2")).kind).toBe("in_doubt");
    expect(await store.listInDoubt()).toHaveLength(1);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(tries()).toBe(triesWhenGivenUp);
  });

  it("gets one last try at close, then is not retried", async () => {
    const { store, down, tries } = blipping();
    const ledger = new CallLedger(store, {
      settleRetry: { firstDelayMs: 60_000, maxDelayMs: 60_000, giveUpAfterMs: 600_000 },
      onStoreFailure: () => undefined,
    });
    const keys = callKeys("p", "key:k");
    await act(ledger, store, keys, "t");
    ledger.settleLater(keys, "call-1", { kind: "result", result }, "dispatched", NOW);
    await until(() => tries() === 1);
    await new Promise((resolve) => setTimeout(resolve, 20));
    down.value = false;
    await ledger.drain();
    expect(tries()).toBe(2);
    expect((await store.get(keys.claim))?.answer).toEqual({ kind: "result", result });
  });
});
