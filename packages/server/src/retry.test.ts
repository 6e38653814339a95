import { InMemoryClaimStore } from "@tessera/core";
import { describe, expect, it } from "vitest";
import { AnswerWrites, type CallClaim, type Decide, once, retrySession } from "./retry.js";

/** A claim store whose settles (the answers) take a while, as a durable store's may. */
function slowAnswers(): InMemoryClaimStore {
  const store = new InMemoryClaimStore();
  const settle = store.settle.bind(store);
  store.settle = async (key, receipt, answer) => {
    await new Promise((resolve) => setTimeout(resolve, 150));
    return settle(key, receipt, answer);
  };
  return store;
}

type Answer = { status: string; messageId?: string };

/**
 * A decision as the kernel's act ledger makes it: the claim recorded with it (here claimed in
 * the store first), a collision answered with the claim as stored, a denial's claim settled
 * with its refusal in the same act. Counts the decisions that ran.
 */
function ledgerDecide(
  claims: InMemoryClaimStore,
  answer: Answer,
  settled: "dispatched" | "denied",
): Decide<Answer> & { runs: number } {
  const decide = async (claim: CallClaim | undefined) => {
    if (claim !== undefined) {
      const taken = await claims.claim(claim.key, claim.record);
      if (taken.status === "already_claimed") return taken;
      if (settled === "denied") {
        await claims.settle(claim.key, { status: "denied", settledAt: 1 }, { ...answer });
      }
    }
    decide.runs++;
    return { answer, settled };
  };
  decide.runs = 0;
  return decide;
}

describe("a retry-safe call's answer, written after the reply", () => {
  it("is waited for by a retry in the same service, without polling past its wait", async () => {
    const claims = slowAnswers();
    // waitMs 0: a retry that polled would give up at once with call_in_progress.
    const options = { waitMs: 0, writes: new AnswerWrites() };
    const decide = ledgerDecide(claims, { status: "delivered", messageId: "m-1" }, "dispatched");
    const first = await once(claims, "p", "c-1", { a: 1 }, decide, options);
    expect(first).toMatchObject({ replayed: false, answer: { messageId: "m-1" } });
    const retry = await once(claims, "p", "c-1", { a: 1 }, decide, options);
    expect(retry).toMatchObject({ replayed: true, answer: { messageId: "m-1" } });
    expect(decide.runs).toBe(1);
  });

  it("is kept in the claim's own answer field: no second key, nothing in worker", async () => {
    const claims = new InMemoryClaimStore();
    const writes = new AnswerWrites();
    const decide = ledgerDecide(claims, { status: "delivered", messageId: "m-9" }, "dispatched");
    await once(claims, "p", "c-9", {}, decide, { waitMs: 0, writes });
    await writes.drain();
    const stored = await claims.get({ session: retrySession("p"), functionCallId: "c-9" });
    expect(stored?.answer).toEqual({ status: "delivered", messageId: "m-9" });
    expect(stored?.receipt?.status).toBe("dispatched");
    expect(stored?.worker).not.toContain("m-9");
    expect(await claims.listInDoubt()).toEqual([]);
  });

  it("leaves the call unsettled until it lands; drain waits for it", async () => {
    const claims = slowAnswers();
    const writes = new AnswerWrites();
    const decide = ledgerDecide(claims, { status: "delivered" }, "dispatched");
    await once(claims, "p", "c-2", {}, decide, { waitMs: 0, writes });
    expect(await claims.listInDoubt(retrySession("p"))).toHaveLength(1);
    await writes.drain();
    expect(await claims.listInDoubt(retrySession("p"))).toHaveLength(0);
    expect(
      (await claims.get({ session: retrySession("p"), functionCallId: "c-2" }))?.receipt,
    ).toMatchObject({ status: "dispatched" });
  });

  it("a denial writes nothing after its reply: its act settled the claim with the refusal", async () => {
    const claims = new InMemoryClaimStore();
    let settles = 0;
    const settle = claims.settle.bind(claims);
    claims.settle = (...args) => {
      settles++;
      return settle(...args);
    };
    const writes = new AnswerWrites();
    const refusal = { status: "denied", code: "no_matching_grant" };
    const decide = ledgerDecide(claims, refusal, "denied");
    await once(claims, "p", "c-3", {}, decide, { waitMs: 0, writes });
    await writes.drain();
    expect(settles).toBe(1);
    const retry = await once(claims, "p", "c-3", {}, decide, { waitMs: 0, writes });
    expect(retry).toEqual({ replayed: true, answer: refusal });
  });

  it("a changed body under the same call ID is a conflict", async () => {
    const claims = new InMemoryClaimStore();
    const options = { waitMs: 0, writes: new AnswerWrites() };
    const decide = ledgerDecide(claims, { status: "delivered" }, "dispatched");
    await once(claims, "p", "c-4", { a: 1 }, decide, options);
    await expect(once(claims, "p", "c-4", { a: 2 }, decide, options)).rejects.toMatchObject({
      code: "call_id_conflict",
    });
  });

  it("replays an answer kept by the release before the ledger (a second key, JSON in worker)", async () => {
    const claims = new InMemoryClaimStore();
    const options = { waitMs: 0, writes: new AnswerWrites() };
    const decide = ledgerDecide(claims, { status: "delivered", messageId: "new" }, "dispatched");
    // What the old release left: the call's claim settled, its answer under the answer key.
    const first = await once(claims, "p", "old", {}, decide, options);
    expect(first.replayed).toBe(false);
    await options.writes.drain();
    const key = { session: retrySession("p"), functionCallId: "legacy" };
    const bodyHash = (await claims.get({ session: retrySession("p"), functionCallId: "old" }))
      ?.bodyHash as string;
    await claims.claim(key, { bodyHash, claimedAt: 1 });
    await claims.settle(key, { status: "dispatched", settledAt: 2 });
    const answerKey = { session: "tessera.service.answer:p", functionCallId: "legacy" };
    await claims.claim(answerKey, {
      bodyHash,
      claimedAt: 2,
      worker: JSON.stringify({ answer: { status: "delivered", messageId: "from-old-release" } }),
    });
    const replay = await once(claims, "p", "legacy", {}, decide, options);
    expect(replay).toEqual({
      replayed: true,
      answer: { status: "delivered", messageId: "from-old-release" },
    });
  });
});

describe("answers written after their replies", () => {
  it("start together, so the store can write them in one statement", async () => {
    const claims = new InMemoryClaimStore();
    const settle = claims.settle.bind(claims);
    const issued: string[] = [];
    let issuedByFirstMicrotask = 0;
    claims.settle = (key, receipt, answer) => {
      if (issued.length === 0) queueMicrotask(() => (issuedByFirstMicrotask = issued.length));
      issued.push(key.functionCallId);
      return settle(key, receipt, answer);
    };
    const writes = new AnswerWrites();
    const decide = ledgerDecide(claims, { status: "delivered" }, "dispatched");
    await Promise.all(
      ["a", "b", "c", "d", "e"].map((id) =>
        once(claims, "p", id, { id }, decide, { waitMs: 0, writes }),
      ),
    );
    // Each answer waits for the window (or a later request) before it is written.
    await new Promise((resolve) => setImmediate(resolve));
    expect(issued).toHaveLength(0);
    await writes.drain();
    expect(issued.sort()).toEqual(["a", "b", "c", "d", "e"]);
    expect(issuedByFirstMicrotask).toBe(5);
    expect(await claims.listInDoubt(retrySession("p"))).toHaveLength(0);
  });
});
