import { describe, expect, it } from "vitest";
import { ctx, grant, NS, OWNER, rig } from "../../test/fixtures.js";
import { explain } from "../audit/explain.js";
import { verifyAuditChain } from "../audit/verify.js";
import { TesseraError } from "../contracts/errors.js";
import { MESSAGE_SEND_ACTION, messageSendCapability } from "../contracts/messages.js";
import { InMemoryClaimStore } from "../memory/claim-store.js";
import type { Act, ActLedger, Withdrawal, WithdrawResult } from "../ports/act-ledger.js";
import { composeActLedger } from "../stores/composed-act-ledger.js";
import { createKernel } from "./kernel.js";

/**
 * A lost store reply (issue 22): the ledger's `record` throws `store_unavailable`, either
 * after the act landed (its reply lost) or before anything was written. The kernel withdraws
 * an act with a claim in the background; a retry of its call ID then reads the withdrawal's
 * answer (landed) or is decided afresh (not landed). `kernel.drain()` gives each pending
 * withdrawal an attempt, so the tests wait on it, never on time.
 */

type Fault = "lost" | "refused";

/** The composed ledger with faults to order: the next records fail as told, withdraw can be down. */
function faulty(inner: ActLedger) {
  const faults: Fault[] = [];
  const withdrawals: { withdrawal: Withdrawal; result?: WithdrawResult }[] = [];
  let withdrawDown = false;
  const unavailable = () => new TesseraError("store_unavailable", "the store's reply was lost");
  const ledger: ActLedger = {
    async record(act: Act) {
      const fault = faults.shift();
      if (fault === "refused") throw unavailable();
      const result = await inner.record(act);
      if (fault === "lost") throw unavailable();
      return result;
    },
    async withdraw(withdrawal) {
      const seen: { withdrawal: Withdrawal; result?: WithdrawResult } = { withdrawal };
      withdrawals.push(seen);
      if (withdrawDown) throw unavailable();
      seen.result = await (inner.withdraw as NonNullable<ActLedger["withdraw"]>)(withdrawal);
      return seen.result;
    },
  };
  return {
    ledger,
    withdrawals,
    fail: (fault: Fault) => faults.push(fault),
    setWithdrawDown: (down: boolean) => {
      withdrawDown = down;
    },
  };
}

function lossyRig() {
  const base = rig();
  const claims = new InMemoryClaimStore();
  const acts = faulty(composeActLedger({ claims, usage: base.usage, audit: base.audit }));
  const delivered: string[] = [];
  const kernel = createKernel({
    grants: base.grants,
    usage: base.usage,
    audit: base.audit,
    acts: acts.ledger,
    clock: base.clock,
    transport: {
      deliver: async (envelope) => {
        delivered.push(envelope.callId as string);
        return { status: "delivered", reply: "ok" };
      },
    },
  });
  const ticket = (maxUses: number) =>
    base.grants.add(
      grant({ capabilities: [messageSendCapability("bob", OWNER)], constraints: { maxUses } }),
    );
  const send = async (callId: string, claimed = true) => {
    const turn = await kernel.openTurnAuthority(ctx());
    try {
      const request = { recipient: "bob", payload: "hi", callId };
      return claimed
        ? await turn.sendMessage(request, claimOf(callId))
        : await turn.sendMessage(request);
    } finally {
      await turn.close();
    }
  };
  return { ...base, claims, acts, kernel, delivered, ticket, send };
}

const claimOf = (callId: string) => ({
  claim: {
    key: { session: "svc", functionCallId: callId },
    record: { bodyHash: "h".repeat(64), claimedAt: 1 },
  },
});

const WITHDRAWN = { status: "denied", code: "authority_unavailable" };

describe("a lost store reply: the kernel withdraws the act", () => {
  it("an allowed send whose act landed is withdrawn: retries read the denial, the use is back once", async () => {
    const r = lossyRig();
    const { id } = await r.ticket(2);
    expect(await r.send("c-0")).toMatchObject({ status: "delivered" });
    r.acts.fail("lost");
    await expect(r.send("c-1")).rejects.toMatchObject({ code: "store_unavailable" });
    expect(r.delivered).toEqual(["c-0"]);
    // Landed: both uses spent, c-1's claim in doubt, until the withdrawal runs.
    expect(await r.usage.getUsage(NS, id)).toBe(2);
    await r.kernel.drain?.();
    expect(r.acts.withdrawals.map((w) => w.result)).toEqual(["withdrawn"]);
    expect(await r.usage.getUsage(NS, id)).toBe(1);
    expect(await r.claims.listInDoubt()).toHaveLength(1); // c-0, dispatched by nobody here

    const retry = await r.send("c-1");
    expect(retry).toMatchObject({
      status: "already_claimed",
      existing: { receipt: { status: "failed" }, answer: WITHDRAWN },
    });
    expect(r.delivered).toEqual(["c-0"]);
    // A second withdrawal of the same act finds it settled: no second use given back.
    const again = await r.acts.ledger.withdraw?.(r.acts.withdrawals[0]?.withdrawal as Withdrawal);
    expect(again).toBe("kept");
    expect(await r.usage.getUsage(NS, id)).toBe(1);

    const events = await r.audit.read({ callId: "c-1" });
    expect(events.map((e) => [e.reason, e.code])).toEqual([
      ["allowed", null],
      ["act_withdrawn", "authority_unavailable"],
    ]);
    expect(events[1]).toMatchObject({
      outcome: "denied",
      grantId: id,
      action: MESSAGE_SEND_ACTION,
    });
    expect(verifyAuditChain(await r.audit.read()).ok).toBe(true);
    expect(await explain(r.audit, "c-1")).toMatchObject({
      verdict: "act_withdrawn",
      code: "authority_unavailable",
      grantId: id,
    });
  });

  it("the last use withdrawn is spendable again: the kernel forgets the spent mark", async () => {
    const r = lossyRig();
    const { id } = await r.ticket(1);
    r.acts.fail("lost");
    await expect(r.send("c-1")).rejects.toMatchObject({ code: "store_unavailable" });
    // Meanwhile the ticket reads spent (the lost act holds its use), and the kernel marks it.
    expect(await r.send("c-2")).toEqual({ status: "denied", code: "tool_unavailable" });
    await r.kernel.drain?.();
    expect(await r.usage.getUsage(NS, id)).toBe(0);
    expect(await r.send("c-3")).toMatchObject({ status: "delivered", grantId: id });
    expect(r.delivered).toEqual(["c-3"]);
    expect(await r.usage.getUsage(NS, id)).toBe(1);
  });

  it("an act that never landed: not_recorded, and a retry of its call ID is decided afresh", async () => {
    const r = lossyRig();
    const { id } = await r.ticket(1);
    r.acts.fail("refused");
    await expect(r.send("c-1")).rejects.toMatchObject({ code: "store_unavailable" });
    await r.kernel.drain?.();
    expect(r.acts.withdrawals.map((w) => w.result)).toEqual(["not_recorded"]);
    expect(await r.audit.read({ callId: "c-1" })).toEqual([]);
    expect(await r.send("c-1")).toMatchObject({ status: "delivered", grantId: id });
    expect(r.delivered).toEqual(["c-1"]);
    expect(await r.usage.getUsage(NS, id)).toBe(1);
  });

  it("a denial whose act landed is kept: its claim was settled denied in the same write", async () => {
    const r = lossyRig();
    r.acts.fail("lost");
    await expect(r.send("c-1")).rejects.toMatchObject({ code: "store_unavailable" });
    await r.kernel.drain?.();
    expect(r.acts.withdrawals.map((w) => w.result)).toEqual(["kept"]);
    expect(r.acts.withdrawals[0]?.withdrawal.event).toMatchObject({
      reason: "act_withdrawn",
      callId: "c-1",
    });
    const retry = await r.send("c-1");
    expect(retry).toMatchObject({
      status: "already_claimed",
      existing: {
        receipt: { status: "denied" },
        answer: { status: "denied", code: "tool_unavailable" },
      },
    });
    const events = await r.audit.read({ callId: "c-1" });
    expect(events.map((e) => e.reason)).toEqual(["no_capability"]);
    expect((await explain(r.audit, "c-1")).verdict).toBe("never_granted");
  });

  it("a denial that never landed: a retry is refused afresh, with its own event", async () => {
    const r = lossyRig();
    r.acts.fail("refused");
    await expect(r.send("c-1")).rejects.toMatchObject({ code: "store_unavailable" });
    await r.kernel.drain?.();
    expect(r.acts.withdrawals.map((w) => w.result)).toEqual(["not_recorded"]);
    expect(await r.send("c-1")).toEqual({ status: "denied", code: "tool_unavailable" });
    expect((await r.audit.read({ callId: "c-1" })).map((e) => e.reason)).toEqual(["no_capability"]);
  });

  it("an act without a claim is never withdrawn (its use may be lost, never spent twice)", async () => {
    const r = lossyRig();
    const { id } = await r.ticket(2);
    r.acts.fail("lost");
    await expect(r.send("c-1", false)).rejects.toMatchObject({ code: "store_unavailable" });
    await r.kernel.drain?.();
    expect(r.acts.withdrawals).toEqual([]);
    expect(await r.usage.getUsage(NS, id)).toBe(1);
  });

  it("while the store stays down, drain returns after one attempt; the withdrawal lands later", async () => {
    const r = lossyRig();
    const { id } = await r.ticket(1);
    r.acts.setWithdrawDown(true);
    r.acts.fail("lost");
    await expect(r.send("c-1")).rejects.toMatchObject({ code: "store_unavailable" });
    await r.kernel.drain?.();
    await r.kernel.drain?.();
    expect(r.acts.withdrawals).toHaveLength(2);
    expect(r.acts.withdrawals.every((w) => w.result === undefined)).toBe(true);
    // Still in doubt, so a retry meets the claim unsettled (the service waits, then 409).
    expect(await r.send("c-1")).toMatchObject({
      status: "already_claimed",
      existing: { functionCallId: "c-1" },
    });
    r.acts.setWithdrawDown(false);
    await r.kernel.drain?.();
    expect(r.acts.withdrawals.map((w) => w.result)).toEqual([undefined, undefined, "withdrawn"]);
    expect(await r.usage.getUsage(NS, id)).toBe(0);
    expect(await r.claims.listInDoubt()).toEqual([]);
  });

  it("close stops the withdrawals: the claim stays in doubt, nothing more is tried", async () => {
    const r = lossyRig();
    await r.ticket(1);
    r.acts.setWithdrawDown(true);
    r.acts.fail("lost");
    await expect(r.send("c-1")).rejects.toMatchObject({ code: "store_unavailable" });
    await r.kernel.drain?.();
    r.kernel.close?.();
    r.acts.setWithdrawDown(false);
    await r.kernel.drain?.();
    expect(r.acts.withdrawals).toHaveLength(1);
    expect(await r.claims.listInDoubt()).toHaveLength(1);
  });
});
