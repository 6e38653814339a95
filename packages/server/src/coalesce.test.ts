import {
  InMemoryAuditSink,
  InMemoryClaimStore,
  InMemoryGrantStore,
  InMemoryGrantUsageStore,
} from "@tessera/core";
import { describe, expect, it } from "vitest";
import { WriteRounds } from "./coalesce.js";

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

/** Holds the thread as a synchronous driver's commit does. */
function commit(): void {
  const until = performance.now() + 0.2;
  while (performance.now() < until) {}
}

/**
 * Records each write and, from a microtask, how many writes had been issued by then. Each
 * write blocks as a synchronous commit does.
 */
function recorder() {
  const issued: string[] = [];
  const seenTogether: number[] = [];
  const write = (name: string) => () => {
    commit();
    issued.push(name);
    queueMicrotask(() => seenTogether.push(issued.length));
    return Promise.resolve(name);
  };
  return { issued, seenTogether, write };
}

/** Two writes issued alone, each blocking: enough for the rounds to hold writes in bursts. */
async function probeBlocking(
  rounds: WriteRounds,
  write: (name: string) => () => Promise<unknown>,
): Promise<void> {
  for (const name of ["probe-1", "probe-2"]) {
    await rounds.issue(write(name));
    await nextTurn();
  }
}

describe("write rounds", () => {
  it("issue a lone request's write at once", async () => {
    const rounds = new WriteRounds();
    const { issued, write } = recorder();
    await nextTurn();
    rounds.enter();
    const answer = rounds.issue(write("a"));
    expect(issued).toEqual(["a"]);
    expect(await answer).toBe("a");
  });

  it("issue the writes of a burst of requests from one callback, each answered its own", async () => {
    const rounds = new WriteRounds();
    const { issued, seenTogether, write } = recorder();
    // Two first writes show the store blocks on its commits.
    await probeBlocking(rounds, write);
    issued.length = 0;
    seenTogether.length = 0;
    await nextTurn();
    rounds.enter();
    rounds.enter();
    const answers = [rounds.issue(write("a")), rounds.issue(write("b")), rounds.issue(write("c"))];
    expect(issued).toEqual([]);
    expect(await Promise.all(answers)).toEqual(["a", "b", "c"]);
    expect(issued).toEqual(["a", "b", "c"]);
    // The first write's microtask ran after all three were issued: one synchronous callback.
    expect(seenTogether[0]).toBe(3);
  });

  it("go back to issuing at once after a turn with one request", async () => {
    const rounds = new WriteRounds();
    const { issued, write } = recorder();
    await probeBlocking(rounds, write);
    issued.length = 0;
    rounds.enter();
    rounds.enter();
    await nextTurn();
    // Still in bursts: held for the round.
    rounds.enter();
    void rounds.issue(write("held"));
    expect(issued).toEqual([]);
    await nextTurn();
    issued.length = 0;
    rounds.enter();
    await nextTurn();
    rounds.enter();
    void rounds.issue(write("alone"));
    expect(issued).toEqual(["alone"]);
  });

  it("issue at once the writes of a store that answers in a later turn, bursts or not", async () => {
    const rounds = new WriteRounds();
    const { issued, write } = recorder();
    await probeBlocking(rounds, write);
    issued.length = 0;
    const later = () => new Promise<string>((resolve) => setTimeout(() => resolve("x"), 5));
    const probed = rounds.issue(later);
    await nextTurn();
    rounds.enter();
    rounds.enter();
    void rounds.issue(write("a"));
    void rounds.issue(write("b"));
    expect(issued).toEqual(["a", "b"]);
    expect(await probed).toBe("x");
  });

  it("do not hold writes after one slow write among quick ones", async () => {
    const rounds = new WriteRounds();
    await rounds.issue(() => Promise.resolve(commit()));
    await nextTurn();
    rounds.enter();
    rounds.enter();
    const issued: string[] = [];
    void rounds.issue(() => Promise.resolve(issued.push("a")));
    expect(issued).toEqual(["a"]);
  });

  it("issue at once the writes of a store that answers at once without blocking", async () => {
    const rounds = new WriteRounds();
    rounds.enter();
    await rounds.issue(() => Promise.resolve("quick"));
    await nextTurn();
    rounds.enter();
    rounds.enter();
    const issued: string[] = [];
    void rounds.issue(() => issued.push("a"));
    void rounds.issue(() => Promise.resolve(issued.push("b")));
    expect(issued).toEqual(["a", "b"]);
  });

  it("reject only the caller whose write threw", async () => {
    const rounds = new WriteRounds();
    await probeBlocking(rounds, () => () => Promise.resolve(commit()));
    rounds.enter();
    rounds.enter();
    const failing = rounds.issue(() => {
      throw new Error("refused");
    });
    const fine = rounds.issue(() => Promise.resolve("ok"));
    await expect(failing).rejects.toThrow("refused");
    expect(await fine).toBe("ok");
  });

  it("wrap only the ports' writes, and call every method on the store itself", async () => {
    const claims = new InMemoryClaimStore();
    const stores = new WriteRounds().stores({
      claims,
      grants: new InMemoryGrantStore(),
      usage: new InMemoryGrantUsageStore(),
      audit: new InMemoryAuditSink(),
    });
    const key = { session: "s", functionCallId: "c" };
    expect(stores.claims.claim).not.toBe(claims.claim);
    expect(await stores.claims.claim(key, { bodyHash: "h", claimedAt: 1 })).toMatchObject({
      status: "claimed",
    });
    await stores.claims.settle(key, { status: "dispatched", settledAt: 2 });
    expect(await stores.claims.get(key)).toMatchObject({ receipt: { status: "dispatched" } });
  });
});
