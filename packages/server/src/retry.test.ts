import { InMemoryClaimStore } from "@tessera/core";
import { describe, expect, it } from "vitest";
import { AnswerWrites, once, retrySession } from "./retry.js";

/** A claim store whose writes of answers take a while, as a durable store's may. */
function slowAnswers(): InMemoryClaimStore {
  const store = new InMemoryClaimStore();
  const claim = store.claim.bind(store);
  store.claim = async (key, record) => {
    if (key.session.startsWith("tessera.service.answer:")) {
      await new Promise((resolve) => setTimeout(resolve, 150));
    }
    return claim(key, record);
  };
  return store;
}

describe("a retry-safe call's answer, written after the reply", () => {
  it("is waited for by a retry in the same service, without polling past its wait", async () => {
    const claims = slowAnswers();
    // waitMs 0: a retry that polled would give up at once with call_in_progress.
    const options = { waitMs: 0, writes: new AnswerWrites() };
    let decided = 0;
    const decide = async () => {
      decided++;
      return { answer: { status: "delivered", messageId: "m-1" }, settled: "dispatched" as const };
    };
    const first = await once(claims, "p", "c-1", { a: 1 }, decide, options);
    expect(first).toMatchObject({ replayed: false, answer: { messageId: "m-1" } });
    const retry = await once(claims, "p", "c-1", { a: 1 }, decide, options);
    expect(retry).toMatchObject({ replayed: true, answer: { messageId: "m-1" } });
    expect(decided).toBe(1);
  });

  it("leaves the call unsettled until it lands; drain waits for it", async () => {
    const claims = slowAnswers();
    const writes = new AnswerWrites();
    await once(
      claims,
      "p",
      "c-2",
      {},
      async () => ({ answer: { status: "denied" }, settled: "denied" as const }),
      { waitMs: 0, writes },
    );
    expect(await claims.listInDoubt(retrySession("p"))).toHaveLength(1);
    await writes.drain();
    expect(await claims.listInDoubt(retrySession("p"))).toHaveLength(0);
    expect(
      (await claims.get({ session: retrySession("p"), functionCallId: "c-2" }))?.receipt,
    ).toMatchObject({ status: "denied" });
  });
});

describe("answers written after their replies", () => {
  it("start together, so the store can write them in one statement", async () => {
    const claims = new InMemoryClaimStore();
    const claim = claims.claim.bind(claims);
    const issued: string[] = [];
    let issuedByFirstMicrotask = 0;
    claims.claim = (key, record) => {
      if (key.session.startsWith("tessera.service.answer:")) {
        if (issued.length === 0) queueMicrotask(() => (issuedByFirstMicrotask = issued.length));
        issued.push(key.functionCallId);
      }
      return claim(key, record);
    };
    const writes = new AnswerWrites();
    const decide = async () => ({ answer: { status: "denied" }, settled: "denied" as const });
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
