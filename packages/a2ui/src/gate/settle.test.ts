import {
  type ClaimKey,
  type ClaimReceipt,
  type ClaimStore,
  InMemoryClaimStore,
  TesseraError,
} from "@tessera/core";
import { describe, expect, it, vi } from "vitest";
import { callMessage, TEST_CATALOG } from "../../test/fixtures/catalog.js";
import { errorCode, expectValidReply, setup } from "../../test/fixtures/gate-setup.js";
import { FunctionCallGate } from "./gate.js";
import { SETTLE_WINDOW_MS } from "./settle-queue.js";

/**
 * A memory store whose settles wait until the test opens the valve, and that counts how many
 * are in flight at once: the window between the reply and the receipt, made visible.
 */
function heldSettles(inner = new InMemoryClaimStore()) {
  let open: () => void = () => undefined;
  let valve = new Promise<void>((resolve) => {
    open = resolve;
  });
  let inFlight = 0;
  let maxInFlight = 0;
  const started: ClaimKey[] = [];
  const claims: ClaimStore = {
    claim: (key, record) => inner.claim(key, record),
    settle: async (key: ClaimKey, receipt: ClaimReceipt) => {
      started.push(key);
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      try {
        await valve;
        await inner.settle(key, receipt);
      } finally {
        inFlight--;
      }
    },
    get: (key) => inner.get(key),
    listInDoubt: (session) => inner.listInDoubt(session),
    endSession: (session) => inner.endSession(session),
    close: () => inner.close(),
  };
  return {
    claims,
    started,
    release: () => open(),
    hold: () => {
      valve = new Promise<void>((resolve) => {
        open = resolve;
      });
    },
    get maxInFlight() {
      return maxInFlight;
    },
  };
}

/** A store whose settle fails `failures` times (with `code`), then works; counts attempts. */
function failingSettles(failures: number, code: "claim_store_unavailable" | "invalid_input") {
  const inner = new InMemoryClaimStore();
  let attempts = 0;
  const claims: ClaimStore = {
    claim: (key, record) => inner.claim(key, record),
    settle: async (key, receipt) => {
      attempts++;
      if (attempts <= failures) throw new TesseraError(code, "settle refused by the test");
      await inner.settle(key, receipt);
    },
    get: (key) => inner.get(key),
    listInDoubt: (session) => inner.listInDoubt(session),
    endSession: (session) => inner.endSession(session),
    close: () => inner.close(),
  };
  return {
    claims,
    get attempts() {
      return attempts;
    },
  };
}

/** Whether `promise` has settled after the event loop has had a few turns. */
async function settledSoon(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  void promise.then(
    () => {
      done = true;
    },
    () => {
      done = true;
    },
  );
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
  return done;
}

describe("FunctionCallGate: receipts after the reply (the default)", () => {
  it("replies before the receipt lands; a duplicate meanwhile reads in doubt and runs nothing", async () => {
    const store = heldSettles();
    const { gate, calls } = setup({ claims: store.claims });
    const result = await gate.handle("s", callMessage("early"));
    expectValidReply(result);
    expect(result.receipt.status).toBe("dispatched");
    expect((await store.claims.get({ session: "s", functionCallId: "early" }))?.receipt).toBe(
      undefined,
    );

    const duplicate = await gate.handle("s", callMessage("early"));
    expect(errorCode(duplicate)).toBe("INVALID_FUNCTION_CALL");
    expect(duplicate.receipt).toMatchObject({ status: "none", previous: "in_doubt" });
    expect(calls).toHaveLength(1);

    store.release();
    await gate.drain();
    expect(store.started).toEqual([{ session: "s", functionCallId: "early" }]);
    // The receipt that lands says what the reply said.
    const stored = await store.claims.get({ session: "s", functionCallId: "early" });
    expect(stored?.receipt?.status).toBe(result.receipt.status);
    const late = await gate.handle("s", callMessage("early"));
    expect(late.receipt).toMatchObject({ status: "none", previous: "dispatched" });
  });

  it("refusals after the claim and failed callbacks are settled the same way", async () => {
    const store = heldSettles();
    const { gate } = setup({
      claims: store.claims,
      approve: (call) => call.functionCallId !== "no",
      invoke: (call) => {
        if (call.functionCallId === "boom") throw new Error("callback failed");
        return 1;
      },
    });
    const results = await Promise.all(
      ["yes", "no", "boom"].map((id) => gate.handle("s", callMessage(id))),
    );
    expect(results.map((r) => r.receipt.status)).toEqual(["dispatched", "denied", "failed"]);
    expect(await store.claims.listInDoubt("s")).toHaveLength(3);
    store.release();
    await gate.drain();
    expect(await store.claims.listInDoubt("s")).toEqual([]);
    for (const [index, id] of ["yes", "no", "boom"].entries()) {
      const stored = await store.claims.get({ session: "s", functionCallId: id });
      expect(stored?.receipt?.status).toBe(results[index]?.receipt.status);
    }
  });

  it("the settles of concurrent calls are in flight together (a store can batch them)", async () => {
    const store = heldSettles();
    const { gate } = setup({ claims: store.claims });
    const ids = Array.from({ length: 16 }, (_, i) => `c${i}`);
    const results = await Promise.all(ids.map((id) => gate.handle("s", callMessage(id))));
    expect(results.every((r) => r.receipt.status === "dispatched")).toBe(true);
    const drained = gate.drain();
    expect(await settledSoon(drained)).toBe(false);
    expect(store.maxInFlight).toBe(16);
    store.release();
    await drained;
    expect(await store.claims.listInDoubt("s")).toEqual([]);
  });

  it("receipts of calls that reply one after another wait in one window and reach the store together", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    try {
      const store = heldSettles();
      const { gate } = setup({ claims: store.claims });
      for (const id of ["w1", "w2", "w3"]) {
        expect((await gate.handle("s", callMessage(id))).receipt.status).toBe("dispatched");
      }
      expect(store.started).toEqual([]);
      vi.advanceTimersByTime(SETTLE_WINDOW_MS);
      await settledSoon(Promise.resolve());
      expect(store.started.map((key) => key.functionCallId)).toEqual(["w1", "w2", "w3"]);
      expect(store.maxInFlight).toBe(3);
      store.release();
      await gate.drain();
      expect(await store.claims.listInDoubt("s")).toEqual([]);
    } finally {
      vi.useRealTimers();
    }
  });

  it("drain sends the receipts waiting in the window at once", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    try {
      const { gate, claims } = setup();
      await gate.handle("s", callMessage("now"));
      // No timer is advanced: the window would hold the receipt, drain does not wait for it.
      await gate.drain();
      expect((await claims.get({ session: "s", functionCallId: "now" }))?.receipt?.status).toBe(
        "dispatched",
      );
    } finally {
      vi.useRealTimers();
    }
  });

  it("drain waits for calls still in their callback, and for their receipts", async () => {
    const store = heldSettles();
    let finishCallback: () => void = () => undefined;
    const { gate } = setup({
      claims: store.claims,
      invoke: () =>
        new Promise<number>((resolve) => {
          finishCallback = () => resolve(7);
        }),
    });
    const handling = gate.handle("s", callMessage("slow"));
    await new Promise((resolve) => setImmediate(resolve));
    const drained = gate.drain();
    expect(await settledSoon(drained)).toBe(false);
    finishCallback();
    expect((await handling).receipt.status).toBe("dispatched");
    expect(await settledSoon(drained)).toBe(false); // the receipt is still held
    store.release();
    await drained;
    const stored = await store.claims.get({ session: "s", functionCallId: "slow" });
    expect(stored?.receipt?.status).toBe("dispatched");
  });

  it("a failed settle is retried; the receipt lands; audit holds one event", async () => {
    const store = failingSettles(2, "claim_store_unavailable");
    const { gate, audit } = setup({ claims: store.claims });
    expect((await gate.handle("s", callMessage("retry"))).receipt.status).toBe("dispatched");
    await gate.drain();
    expect(store.attempts).toBe(3);
    const stored = await store.claims.get({ session: "s", functionCallId: "retry" });
    expect(stored?.receipt?.status).toBe("dispatched");
    expect(audit.events.map((e) => e.receipt)).toEqual(["dispatched"]);
  });

  it("a settle that keeps failing is given up: in doubt, said in audit, never thrown", async () => {
    const store = failingSettles(Number.POSITIVE_INFINITY, "claim_store_unavailable");
    const { gate, audit, calls } = setup({ claims: store.claims });
    const result = await gate.handle("s", callMessage("lost"));
    expect(result.receipt.status).toBe("dispatched");
    await gate.drain();
    expect(store.attempts).toBe(3);
    expect(await store.claims.listInDoubt("s")).toMatchObject([{ functionCallId: "lost" }]);
    expect(audit.events).toMatchObject([
      { reason: "dispatched", receipt: "dispatched", outcome: "allowed" },
      {
        reason: "dispatched",
        receipt: "in_doubt",
        outcome: "allowed",
        callId: "lost",
        detail: expect.stringContaining("claim_store_unavailable, 3 attempt(s)"),
      },
    ]);
    // Never re-run: a retry is a refused duplicate of a call in doubt.
    const again = await gate.handle("s", callMessage("lost"));
    expect(again.receipt).toMatchObject({ status: "none", previous: "in_doubt" });
    expect(calls).toHaveLength(1);
  });

  it("a settle the store refuses outright (invalid_input) is not retried", async () => {
    const store = failingSettles(Number.POSITIVE_INFINITY, "invalid_input");
    const { gate, audit } = setup({ claims: store.claims });
    await gate.handle("s", callMessage("gone"));
    await gate.drain();
    expect(store.attempts).toBe(1);
    expect(audit.events.at(-1)).toMatchObject({ receipt: "in_doubt" });
  });

  it("a store whose settle throws synchronously is handled like one that rejects", async () => {
    const inner = new InMemoryClaimStore();
    let attempts = 0;
    const claims: ClaimStore = {
      claim: (key, record) => inner.claim(key, record),
      settle: () => {
        attempts++;
        throw new TesseraError("claim_store_unavailable", "thrown, not rejected");
      },
      get: (key) => inner.get(key),
      listInDoubt: (session) => inner.listInDoubt(session),
      endSession: (session) => inner.endSession(session),
      close: () => inner.close(),
    };
    for (const settle of ["after-reply", "before-reply"] as const) {
      const { gate } = setup({ claims, settle });
      const result = await gate.handle("s", callMessage(`sync-throw-${settle}`));
      expect(result.receipt.status).toBe("dispatched");
      await gate.drain();
    }
    expect(attempts).toBe(6);
    expect(await inner.listInDoubt("s")).toHaveLength(2);
  });

  it("close refuses new calls before any claim, drains, and leaves the store open", async () => {
    const store = heldSettles();
    const { gate, calls } = setup({ claims: store.claims });
    await gate.handle("s", callMessage("before"));
    const closing = gate.close();
    const refused = await gate.handle("s", callMessage("after"));
    expectValidReply(refused);
    expect(errorCode(refused)).toBe("EXECUTION_FAILED");
    expect(refused.receipt).toMatchObject({ status: "denied", reason: "claim_store_unavailable" });
    expect(await store.claims.get({ session: "s", functionCallId: "after" })).toBeUndefined();
    expect(await settledSoon(closing)).toBe(false);
    store.release();
    await closing;
    expect(calls.map((c) => c.functionCallId)).toEqual(["before"]);
    expect(
      (await store.claims.get({ session: "s", functionCallId: "before" }))?.receipt?.status,
    ).toBe("dispatched");
    // The refused ID was never claimed: another worker's gate may run it.
    const other = setup({ claims: store.claims });
    expect((await other.gate.handle("s", callMessage("after"))).receipt.status).toBe("dispatched");
    await other.gate.drain();
  });

  it("await using closes the gate", async () => {
    const { gate, claims } = setup();
    {
      await using scoped = gate;
      await scoped.handle("s", callMessage("scoped"));
    }
    expect((await gate.handle("s", callMessage("next"))).receipt.reason).toBe(
      "claim_store_unavailable",
    );
    expect(await claims.get({ session: "s", functionCallId: "next" })).toBeUndefined();
  });
});

describe("FunctionCallGate: receipts before the reply", () => {
  it("the reply waits until the receipt has landed", async () => {
    const store = heldSettles();
    const { gate } = setup({ claims: store.claims, settle: "before-reply" });
    const handling = gate.handle("s", callMessage("sync"));
    expect(await settledSoon(handling)).toBe(false);
    store.release();
    expect((await handling).receipt.status).toBe("dispatched");
    const stored = await store.claims.get({ session: "s", functionCallId: "sync" });
    expect(stored?.receipt?.status).toBe("dispatched");
  });

  it("a receipt that cannot be written is noted in the decision's one audit event", async () => {
    const store = failingSettles(Number.POSITIVE_INFINITY, "claim_store_unavailable");
    const { gate, audit } = setup({ claims: store.claims, settle: "before-reply" });
    expect((await gate.handle("s", callMessage("x"))).receipt.status).toBe("dispatched");
    expect(store.attempts).toBe(3);
    expect(audit.events).toHaveLength(1);
    expect(audit.events[0]).toMatchObject({
      receipt: "dispatched",
      detail: expect.stringContaining("the claim stays in doubt"),
    });
  });

  it("an unknown settle timing is a configuration error", () => {
    expect(
      () =>
        new FunctionCallGate({
          claims: new InMemoryClaimStore(),
          catalog: TEST_CATALOG,
          invoke: () => 1,
          settle: "later" as never,
        }),
    ).toThrow(expect.objectContaining({ code: "invalid_config" }));
  });
});
