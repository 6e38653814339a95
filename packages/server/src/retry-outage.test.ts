import { InMemoryClaimStore, TesseraError } from "@tessera/core";
import { describe, expect, it } from "vitest";
import { AnswerWrites, type CallClaim, once, retrySession } from "./retry.js";

/**
 * Retry-safe calls while the store is down or a call was withdrawn (issue 22): answers written
 * after their replies are tried again until they land (drain never waits out an outage, close
 * gives up after its bound and names what was lost), and a retry waiting on a claim in doubt
 * returns as soon as the claim is settled (a withdrawn act's answer is a denial) or gone.
 */

/** A claim store whose settles fail while `down`, as a store in an outage does. */
function flaky() {
  const claims = new InMemoryClaimStore();
  const settle = claims.settle.bind(claims);
  const state = { down: false, attempts: 0 };
  claims.settle = async (key, receipt, answer) => {
    state.attempts++;
    if (state.down) throw new TesseraError("claim_store_unavailable", "the store is down");
    return settle(key, receipt, answer);
  };
  return { claims, state };
}

/** A decision recorded with its claim (claimed first, as the act ledger does), allowed. */
function allowing(claims: InMemoryClaimStore) {
  return async (claim: CallClaim | undefined) => {
    if (claim !== undefined) {
      const taken = await claims.claim(claim.key, claim.record);
      if (taken.status === "already_claimed") return taken;
    }
    return { answer: { status: "delivered", messageId: "m-1" }, settled: "dispatched" as const };
  };
}

const keyOf = (callId: string) => ({ session: retrySession("p"), functionCallId: callId });
const WITHDRAWN = { status: "denied", code: "authority_unavailable" };

describe("an answer written after its reply while the store is down", () => {
  it("is tried again until it lands; drain gives it one attempt and returns", async () => {
    const { claims, state } = flaky();
    const failures: unknown[] = [];
    const writes = new AnswerWrites({ onFailure: (error) => failures.push(error) });
    state.down = true;
    await once(claims, "p", "c-1", {}, allowing(claims), { waitMs: 0, writes });
    await writes.drain();
    await writes.drain();
    expect(state.attempts).toBe(2);
    expect(failures).toHaveLength(2);
    expect(failures[0]).toMatchObject({ code: "claim_store_unavailable" });
    expect(writes.size).toBe(1);
    expect((await claims.get(keyOf("c-1")))?.receipt).toBeUndefined();
    state.down = false;
    await writes.drain();
    expect(writes.size).toBe(0);
    expect(await claims.get(keyOf("c-1"))).toMatchObject({
      receipt: { status: "dispatched" },
      answer: { status: "delivered", messageId: "m-1" },
    });
    // A retry now reads the answer that landed late.
    const retry = await once(claims, "p", "c-1", {}, allowing(claims), { waitMs: 0, writes });
    expect(retry).toEqual({ replayed: true, answer: { status: "delivered", messageId: "m-1" } });
  });

  it("a retry in the same service waits for one attempt, not for the outage", async () => {
    const { claims, state } = flaky();
    const writes = new AnswerWrites();
    state.down = true;
    await once(claims, "p", "c-2", {}, allowing(claims), { waitMs: 0, writes });
    await expect(
      once(claims, "p", "c-2", {}, allowing(claims), { waitMs: 0, writes }),
    ).rejects.toMatchObject({ code: "call_in_progress" });
    expect(state.attempts).toBe(1);
  });

  it("close gives up after its bound and names the calls whose answers were not written", async () => {
    const { claims, state } = flaky();
    const writes = new AnswerWrites();
    state.down = true;
    await once(claims, "p", "c-3", {}, allowing(claims), { waitMs: 0, writes });
    await once(claims, "p", "c-4", {}, allowing(claims), { waitMs: 0, writes });
    const unwritten = await writes.close(100);
    expect(unwritten.map((id) => id.split("\u0000")[1]).sort()).toEqual(["c-3", "c-4"]);
    const tried = state.attempts;
    state.down = false;
    await writes.drain();
    expect(state.attempts).toBe(tried);
    expect(await claims.listInDoubt()).toHaveLength(2);
  });

  it("an answer handed over after close that cannot land is named once, not dropped silently", async () => {
    const { claims, state } = flaky();
    const abandoned: string[] = [];
    const writes = new AnswerWrites({ onAbandoned: (id) => abandoned.push(id) });
    state.down = true;
    await once(claims, "p", "c-early", {}, allowing(claims), { waitMs: 0, writes });
    expect((await writes.close(50)).map((id) => id.split("\u0000")[1])).toEqual(["c-early"]);
    // A request the drain cut off finishes now: its answer is handed over to a closed writer.
    await once(claims, "p", "c-late", {}, allowing(claims), { waitMs: 0, writes });
    await writes.drain();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(abandoned.map((id) => id.split("\u0000")[1])).toEqual(["c-late"]);
  });

  it("close waits for answers that can land", async () => {
    const { claims } = flaky();
    const writes = new AnswerWrites();
    await once(claims, "p", "c-5", {}, allowing(claims), { waitMs: 0, writes });
    expect(await writes.close()).toEqual([]);
    expect((await claims.get(keyOf("c-5")))?.receipt?.status).toBe("dispatched");
  });
});

describe("a retry meeting a claim in doubt", () => {
  /** A claim recorded by a request that never answered (its act's reply was lost). */
  async function inDoubt(
    claims: InMemoryClaimStore,
    callId: string,
    principal = "p",
  ): Promise<void> {
    const writes = new AnswerWrites();
    const lost = async (claim: CallClaim | undefined) => {
      if (claim !== undefined) await claims.claim(claim.key, claim.record);
      throw new TesseraError("store_unavailable", "the store's reply was lost");
    };
    await expect(
      once(claims, principal, callId, {}, lost, { waitMs: 0, writes }),
    ).rejects.toThrow();
  }

  it("replays the withdrawal's denial as soon as the claim is settled with it", async () => {
    const claims = new InMemoryClaimStore();
    await inDoubt(claims, "c-6");
    const writes = new AnswerWrites();
    // Long enough that only the settle can end the wait inside the test's time.
    const retry = once(claims, "p", "c-6", {}, allowing(claims), { waitMs: 600_000, writes });
    await new Promise((resolve) => setTimeout(resolve, 30));
    await claims.settle(keyOf("c-6"), { status: "failed", settledAt: 5 }, WITHDRAWN);
    expect(await retry).toEqual({ replayed: true, answer: WITHDRAWN });
  });

  it("stops waiting when the claim is settled without an answer, or is gone", async () => {
    const claims = new InMemoryClaimStore();
    await inDoubt(claims, "c-7");
    await inDoubt(claims, "c-8", "q");
    const writes = new AnswerWrites();
    const options = { waitMs: 600_000, writes };
    const settled = once(claims, "p", "c-7", {}, allowing(claims), options);
    const gone = once(claims, "q", "c-8", {}, allowing(claims), options);
    await new Promise((resolve) => setTimeout(resolve, 30));
    await claims.settle(keyOf("c-7"), { status: "failed", settledAt: 5 });
    await claims.endSession(retrySession("q"));
    await expect(settled).rejects.toMatchObject({ code: "call_in_progress" });
    await expect(gone).rejects.toMatchObject({ code: "call_in_progress" });
  });
});
