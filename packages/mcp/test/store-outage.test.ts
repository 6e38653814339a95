import {
  type ActLedger,
  type AuditSink,
  InMemoryAuditSink,
  InMemoryClaimStore,
  InMemoryGrantUsageStore,
  TesseraError,
} from "@tessera/core";
import type { StoreFailure } from "@tessera/mcp";
import { afterEach, describe, expect, it } from "vitest";
import { ALICE_TOKEN, type Harness, startHarness, textOf, toolGrant } from "./support.js";

/**
 * The store failing while the gateway runs: what the caller is told, and what becomes of the
 * writes the gateway makes beside the caller's answer (a failed call's own event, an answer
 * settled after the reply).
 */
const KEY = "io.tessera/idempotency-key";
let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const storeDown = (): never => {
  throw new TesseraError("claim_store_unavailable", "the store is down");
};

async function until(done: () => Promise<boolean> | boolean): Promise<void> {
  for (let i = 0; i < 300 && !(await done()); i++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe("a store down during a call", () => {
  it("answers claim_store_unavailable (nothing ran) even when the failure's own event cannot be written either", async () => {
    // The act and the audit sink are the same store in a real bundle: both fail.
    const acts: ActLedger = { record: async () => storeDown() };
    const audit: AuditSink = { append: async () => storeDown() };
    const failures: StoreFailure[] = [];
    harness = await startHarness(
      { acts, audit, onStoreFailure: (failure) => failures.push(failure) },
      [toolGrant("alice", ["messages", "echo"])],
    );
    const alice = await harness.client(ALICE_TOKEN);
    const error = await alice
      .callTool({ name: "messages.echo", arguments: { text: "hi" }, _meta: { [KEY]: "down-1" } })
      .then(
        () => undefined,
        (e: unknown) => e as { code?: number; data?: { code?: string }; message?: string },
      );
    expect(error?.code).toBe(-32603);
    expect(error?.data?.code).toBe("claim_store_unavailable");
    expect(error?.message).toContain("nothing ran");
    expect(harness.counts()).toBe(0);
    // The event that could not be written is reported, not lost in silence.
    expect(failures).toEqual([
      expect.objectContaining({
        write: "audit_event",
        callId: "down-1",
        code: "audit_unavailable",
      }),
    ]);
  });
});

describe("a store blip while a forwarded call runs", () => {
  it("keeps the answer once the store is back; a duplicate meanwhile gets the answer, never call_in_progress", async () => {
    const claims = new InMemoryClaimStore();
    const settle = claims.settle.bind(claims);
    let down = true;
    let settles = 0;
    claims.settle = async (key, receipt, answer) => {
      settles++;
      if (down) storeDown();
      return settle(key, receipt, answer);
    };
    const failures: StoreFailure[] = [];
    harness = await startHarness(
      {
        claims,
        usage: new InMemoryGrantUsageStore(),
        audit: new InMemoryAuditSink(),
        onStoreFailure: (failure) => failures.push(failure),
      },
      [toolGrant("alice", ["messages", "echo"])],
    );
    const alice = await harness.client(ALICE_TOKEN);
    const call = { name: "messages.echo", arguments: { text: "hi" }, _meta: { [KEY]: "blip-1" } };
    const first = await alice.callTool(call);
    expect(first.isError ?? false).toBe(false);
    await until(() => settles > 0);
    // The same gateway process answers from the answer it holds while the settle is retried.
    expect(await alice.callTool(call)).toEqual(first);
    expect(failures[0]).toMatchObject({
      write: "answer",
      callId: "blip-1",
      code: "claim_store_unavailable",
    });
    const [unsettled] = await claims.listInDoubt();
    expect(unsettled?.functionCallId).toBe("key:blip-1");
    down = false;
    // The background retry (first after 250 ms) settles the claim with the answer.
    await until(async () => (await claims.listInDoubt()).length === 0);
    const stored = unsettled === undefined ? undefined : await claims.get(unsettled);
    expect(stored?.receipt?.status).toBe("dispatched");
    expect(stored?.answer).toEqual({ kind: "result", result: first });
    expect(harness.counts("echo")).toBe(1);
    expect(textOf(await alice.callTool(call))).toBe(textOf(first));
    expect(harness.counts("echo")).toBe(1);
  });
});
