import {
  type AccessContext,
  type ActLedger,
  type AuthorizeResult,
  a2uiFunctionCapability,
  type ClaimKey,
  type ClaimReceipt,
  type ClaimRecord,
  type ClaimStore,
  createKernel,
  explain,
  type GrantInput,
  InMemoryAuditSink,
  InMemoryClaimStore,
  InMemoryGrantStore,
  InMemoryGrantUsageStore,
  type JsonValue,
  TesseraError,
} from "@tessera/core";
import { composeActLedger } from "@tessera/core/store-kit";
import { describe, expect, it } from "vitest";
import { CATALOG_ID, callMessage } from "../../test/fixtures/catalog.js";
import { correlatedId, errorCode, setup } from "../../test/fixtures/gate-setup.js";
import { kernelApproval, kernelDecision } from "./kernel-approval.js";
import type { FunctionCallGateOptions } from "./types.js";

/**
 * The gate's `decide`: claim and kernel decision as ONE act of the kernel's act ledger, instead
 * of a claim followed by an approval. The gate's own claim step is never taken.
 */
const NOW = 1_700_000_000_000;
const ctx = (actor: string): AccessContext => ({
  namespaceId: "team",
  actor,
  authority: "host",
  owner: "alice",
  traceId: "t",
});

function grant(id: string, subject: string, maxUses?: number): GrantInput {
  return {
    id,
    namespaceId: "team",
    issuer: "host",
    subject,
    capabilities: [a2uiFunctionCapability(CATALOG_ID, "add")],
    ...(maxUses === undefined ? {} : { constraints: { maxUses } }),
    issuedAt: new Date(NOW - 60_000).toISOString(),
  };
}

/** A memory claim store that records each `claim` the gate itself makes, and every `settle`. */
function watchedClaims() {
  const store = new InMemoryClaimStore();
  const gateClaims: ClaimKey[] = [];
  const settles: { key: ClaimKey; receipt: ClaimReceipt; answer?: JsonValue }[] = [];
  const watched = {
    claim: (key: ClaimKey, record: ClaimRecord) => {
      gateClaims.push(key);
      return store.claim(key, record);
    },
    settle: (key: ClaimKey, receipt: ClaimReceipt, answer?: JsonValue) => {
      settles.push(answer === undefined ? { key, receipt } : { key, receipt, answer });
      return store.settle(key, receipt, answer);
    },
    get: (key: ClaimKey) => store.get(key),
    listInDoubt: (session: string) => store.listInDoubt(session),
  } as unknown as ClaimStore;
  // What the act ledger claims through: the same store, not counted as the gate's own claims.
  const ledger = {
    ...watched,
    claim: (key: ClaimKey, record: ClaimRecord) => store.claim(key, record),
  };
  return { claims: watched, ledger: ledger as ClaimStore, gateClaims, settles };
}

async function rig(
  options: {
    ledger?: boolean;
    outage?: { down: boolean };
    invoke?: FunctionCallGateOptions["invoke"];
    onDecision?: (answer: AuthorizeResult) => void;
  } = {},
) {
  const grants = new InMemoryGrantStore();
  const usage = new InMemoryGrantUsageStore();
  const audit = new InMemoryAuditSink();
  const { claims, ledger, gateClaims, settles } = watchedClaims();
  await grants.add(grant("g-add", "asker"));
  await grants.add(grant("g-once", "once", 1));
  const composed = composeActLedger({ claims: ledger, usage, audit });
  // A store that cannot record (down): the ledger's all or nothing, nothing of the act written.
  const outage = options.outage;
  const acts: ActLedger = {
    record: (act) =>
      outage?.down === true
        ? Promise.reject(new TesseraError("store_unavailable", "the store is down"))
        : composed.record(act),
  };
  const kernel = createKernel({
    grants,
    usage,
    audit,
    clock: { now: () => NOW },
    ...(options.ledger === false ? {} : { acts, denials: "before-reply" as const }),
  });
  const decide = kernelDecision(
    kernel,
    ({ session }) => (session === "nobody" ? undefined : ctx(session)),
    options.onDecision,
  );
  // The gate's own `claims` over setup's: the store the ledger writes is the one to read.
  const invoke = options.invoke === undefined ? {} : { invoke: options.invoke };
  return {
    ...setup({ claims, decide, audit, ...invoke }),
    usage,
    claims,
    gateClaims,
    settles,
    audit,
    kernel,
  };
}

describe("the gate's decide (kernelDecision)", () => {
  it("allowed: the act takes the claim (the gate claims nothing itself), the callback runs, the reply is kept as the claim's answer", async () => {
    const { gate, calls, claims, gateClaims, audit } = await rig();
    const result = await gate.handle("asker", callMessage("c-1"));
    expect(result.receipt.status).toBe("dispatched");
    expect(calls).toHaveLength(1);
    expect(gateClaims).toEqual([]);
    await gate.drain();
    const stored = await claims.get({ session: "asker", functionCallId: "c-1" });
    expect(stored).toMatchObject({ worker: "test", receipt: { status: "dispatched" } });
    expect(stored?.answer).toEqual(result.reply);
    expect(audit.events.map((e) => [e.source, e.reason])).toEqual([
      ["kernel", "allowed"],
      ["gate", "dispatched"],
    ]);
  });

  it("a reply too large to keep as the answer: the receipt is still written, without it", async () => {
    const { gate, claims, settles } = await rig({ invoke: () => "x".repeat(1_100_000) });
    const result = await gate.handle("asker", callMessage("c-big"));
    expect(result.receipt.status).toBe("dispatched");
    await gate.drain();
    const stored = await claims.get({ session: "asker", functionCallId: "c-big" });
    // Before, the store's refusal of the answer was final: no receipt, the call in doubt.
    expect(stored?.receipt?.status).toBe("dispatched");
    expect(stored?.answer).toBeUndefined();
    expect(settles.map((s) => s.answer === undefined)).toEqual([false, true]);
  });

  it("denied: the act settles the claim denied with the refusal; the gate writes no second settle, nothing runs", async () => {
    const { gate, calls, claims, settles, audit } = await rig();
    const stranger = await gate.handle("stranger", callMessage("c-2"));
    expect(stranger.receipt).toMatchObject({ status: "denied", reason: "policy_denied" });
    expect(errorCode(stranger)).toBe("EXECUTION_FAILED");
    await gate.drain();
    expect(calls).toHaveLength(0);
    const stored = await claims.get({ session: "stranger", functionCallId: "c-2" });
    expect(stored?.receipt?.status).toBe("denied");
    expect(stored?.answer).toEqual({ status: "denied", code: "tool_unavailable" });
    expect(settles.filter((s) => s.key.functionCallId === "c-2")).toHaveLength(1);
    expect((await explain(audit, "c-2")).verdict).toBe("never_granted");
  });

  it("a duplicate gets the existing claim: correlated INVALID_FUNCTION_CALL, receipt none, nothing decided or spent again", async () => {
    const { gate, calls, usage } = await rig();
    const first = await gate.handle("once", callMessage("d-1"));
    expect(first.receipt.status).toBe("dispatched");
    await gate.drain();
    const again = await gate.handle("once", callMessage("d-1", { a: 5, b: 5 }));
    expect(again.receipt).toMatchObject({
      status: "none",
      reason: "duplicate_call",
      previous: "dispatched",
      changedBody: true,
    });
    expect(errorCode(again)).toBe("INVALID_FUNCTION_CALL");
    expect(correlatedId(again)).toBe("d-1");
    expect(calls).toHaveLength(1);
    expect(await usage.getUsage("team", "g-once")).toBe(1);
  });

  it("racing calls of one ID: one act wins, the other is the duplicate", async () => {
    const { gate, calls } = await rig();
    const results = await Promise.all([
      gate.handle("asker", callMessage("r-1")),
      gate.handle("asker", callMessage("r-1")),
    ]);
    expect(results.map((r) => r.receipt.status).sort()).toEqual(["dispatched", "none"]);
    expect(calls).toHaveLength(1);
  });

  it("a decision that records nothing (a kernel without an act ledger, nobody for the session) fails closed and leaves the ID free", async () => {
    for (const [options, session] of [
      [{ ledger: false }, "asker"],
      [{}, "nobody"],
    ] as const) {
      const { gate, calls, claims } = await rig(options);
      const result = await gate.handle(session, callMessage("f-1"));
      expect(result.receipt).toMatchObject({ status: "denied", reason: "claim_store_unavailable" });
      expect(calls).toHaveLength(0);
      expect(await claims.get({ session, functionCallId: "f-1" })).toBeUndefined();
    }
  });

  it("a store down at the act: refused claim_store_unavailable, nothing claimed or spent; after recovery the same ID is decided and runs", async () => {
    const outage = { down: true };
    const { gate, calls, claims, usage } = await rig({ outage });
    const refused = await gate.handle("once", callMessage("s-1"));
    expect(refused.receipt).toMatchObject({ status: "denied", reason: "claim_store_unavailable" });
    expect(await claims.get({ session: "once", functionCallId: "s-1" })).toBeUndefined();
    expect(await usage.getUsage("team", "g-once")).toBe(0);
    outage.down = false;
    const retried = await gate.handle("once", callMessage("s-1"));
    expect(retried.receipt.status).toBe("dispatched");
    expect(calls).toHaveLength(1);
    expect(await usage.getUsage("team", "g-once")).toBe(1);
  });

  it("an onDecision hook that throws after the act was recorded: the call runs, its ID is not left in doubt", async () => {
    const { gate, calls, claims, usage } = await rig({
      onDecision: () => {
        throw new Error("metrics backend down");
      },
    });
    const result = await gate.handle("once", callMessage("h-1"));
    // Before, the throw made `decide` reject after the act had been recorded: the gate answered
    // claim_store_unavailable ("the ID stays free") while the claim held the ID, unsettled, in
    // doubt forever, with the bounded use spent and nothing run.
    expect(result.receipt).toMatchObject({ status: "dispatched", reason: "dispatched" });
    expect(calls).toHaveLength(1);
    await gate.drain();
    expect(await usage.getUsage("team", "g-once")).toBe(1);
    expect(await claims.listInDoubt("once")).toEqual([]);
    const stored = await claims.get({ session: "once", functionCallId: "h-1" });
    expect(stored?.receipt?.status).toBe("dispatched");
  });

  it("refuses approve and decide together, and a decide that is not a function", async () => {
    const { kernel } = await rig();
    const decide = kernelDecision(kernel, ({ session }) => ctx(session));
    const approve = kernelApproval(kernel, ({ session }) => ctx(session));
    expect(() => setup({ decide, approve })).toThrow(/not both/);
    expect(() => setup({ decide: "yes" as never })).toThrow(/decide must be a function/);
  });

  it("without decide the gate settles the receipt alone, as before", async () => {
    const { claims, gateClaims, settles } = watchedClaims();
    const { gate } = setup({ claims });
    await gate.handle("s", callMessage("p-1"));
    await gate.drain();
    expect(gateClaims).toHaveLength(1);
    expect(settles).toHaveLength(1);
    expect(settles[0]).not.toHaveProperty("answer");
  });
});
