import { describe, expect, it } from "vitest";
import { InMemoryClaimStore } from "./claim-store.js";

const record = { bodyHash: "b", claimedAt: 1, worker: "w" };

describe("InMemoryClaimStore", () => {
  it("claims once per (session, ID), settles, lists in-doubt claims and ends sessions", async () => {
    const store = new InMemoryClaimStore();
    const key = { session: "s", functionCallId: "1" };
    expect(await store.claim(key, record)).toEqual({ status: "claimed" });
    expect(await store.claim(key, { ...record, bodyHash: "other" })).toEqual({
      status: "already_claimed",
      existing: { ...key, ...record },
    });
    expect(await store.claim({ session: "t", functionCallId: "1" }, record)).toEqual({
      status: "claimed",
    });
    expect(await store.listInDoubt("s")).toEqual([{ ...key, ...record }]);
    await store.settle(key, { status: "failed", settledAt: 2 });
    expect((await store.get(key))?.receipt).toEqual({ status: "failed", settledAt: 2 });
    expect(await store.listInDoubt()).toEqual([{ session: "t", functionCallId: "1", ...record }]);
    await store.settle(key, { status: "dispatched", settledAt: 3 });
    expect((await store.get(key))?.receipt).toEqual({ status: "failed", settledAt: 2 });
    await expect(
      store.settle({ session: "s", functionCallId: "never" }, { status: "failed", settledAt: 2 }),
    ).rejects.toMatchObject({ code: "invalid_input" });
    expect(await store.get({ session: "s", functionCallId: "never" })).toBeUndefined();
    await store.endSession("s");
    expect(await store.get(key)).toBeUndefined();
    expect(await store.listInDoubt()).toHaveLength(1);
  });

  it("two stores are two worlds: the failure mode across processes", async () => {
    const key = { session: "s", functionCallId: "1" };
    expect(await new InMemoryClaimStore().claim(key, record)).toEqual({ status: "claimed" });
    expect(await new InMemoryClaimStore().claim(key, record)).toEqual({ status: "claimed" });
  });
});
