import { describe, expect, it } from "vitest";
import { ctx, grant, OWNER, rig } from "../../test/fixtures.js";
import { messageSendCapability } from "../contracts/messages.js";
import type { AuditEvent } from "../contracts/schemas.js";
import { InMemoryAuditSink } from "../memory/audit-sink.js";
import { InMemoryClaimStore } from "../memory/claim-store.js";
import type { Act, ActLedger } from "../ports/act-ledger.js";
import type { AuditSink } from "../ports/audit-sink.js";
import { composeActLedger } from "../stores/composed-act-ledger.js";
import { createKernel } from "./kernel.js";

/**
 * The kernel over an act ledger: the decision's spend and event (and the caller's claim) are
 * one `acts.record`; denials without a claim are written after the answer. The ledger here is
 * the in-memory composition, counted, so each test knows how many acts were recorded.
 */

interface Counted extends ActLedger {
  readonly acts: Act[];
}

function counted(inner: ActLedger): Counted {
  const acts: Act[] = [];
  return {
    acts,
    record(act) {
      acts.push(act);
      return inner.record(act);
    },
  };
}

function ledgerRig(options: { denials?: "after-reply" | "before-reply"; audit?: AuditSink } = {}) {
  const base = rig();
  const claims = new InMemoryClaimStore();
  const audit = options.audit ?? base.audit;
  const acts = counted(composeActLedger({ claims, usage: base.usage, audit }));
  const delivered: string[] = [];
  const kernel = createKernel({
    grants: base.grants,
    usage: base.usage,
    audit,
    acts,
    clock: base.clock,
    ...(options.denials === undefined ? {} : { denials: options.denials }),
    transport: {
      deliver: async (envelope) => {
        delivered.push(envelope.callId as string);
        return { status: "delivered", reply: "ok" };
      },
    },
  });
  const ticket = (recipient: string, maxUses = 1) =>
    base.grants.add(
      grant({ capabilities: [messageSendCapability(recipient, OWNER)], constraints: { maxUses } }),
    );
  return { ...base, claims, acts, kernel, delivered, ticket };
}

const claimOf = (callId: string, bodyHash = "h".repeat(64)) => ({
  claim: { key: { session: "svc", functionCallId: callId }, record: { bodyHash, claimedAt: 1 } },
});

describe("the kernel over an act ledger", () => {
  it("an allowed send is one act (claim, spend, event), recorded before it is delivered", async () => {
    const r = ledgerRig();
    await r.ticket("bob");
    const turn = await r.kernel.openTurnAuthority(ctx());
    const sent = await turn.sendMessage(
      { recipient: "bob", payload: "hi", callId: "c-1" },
      claimOf("c-1"),
    );
    expect(sent).toMatchObject({ status: "delivered", reply: "ok" });
    expect(r.acts.acts).toHaveLength(1);
    expect(r.acts.acts[0]).toMatchObject({
      claim: { key: { functionCallId: "c-1" } },
      spend: { maxUses: 1 },
      event: { outcome: "allowed", callId: "c-1" },
      exhausted: { outcome: "denied", reason: "grant_exhausted" },
    });
    expect(r.delivered).toEqual(["c-1"]);
    expect(r.audit.events.map((e) => e.reason)).toEqual(["allowed"]);
    // The claim stays open for its answer: the caller settles it after the effect.
    expect(
      (await r.claims.get({ session: "svc", functionCallId: "c-1" }))?.receipt,
    ).toBeUndefined();
  });

  it("a retry of the claimed call ID decides nothing: no spend, no delivery, no event", async () => {
    const r = ledgerRig();
    await r.ticket("bob", 5);
    const turn = await r.kernel.openTurnAuthority(ctx());
    await turn.sendMessage({ recipient: "bob", payload: "hi", callId: "c-1" }, claimOf("c-1"));
    const again = await turn.sendMessage(
      { recipient: "bob", payload: "hi", callId: "c-1" },
      claimOf("c-1"),
    );
    expect(again).toMatchObject({ status: "already_claimed", existing: { functionCallId: "c-1" } });
    expect(r.delivered).toEqual(["c-1"]);
    expect(r.audit.events).toHaveLength(1);
    expect(
      await r.usage.getUsage(
        "ns-test",
        (await r.grants.listGrants("ns-test", "asker"))[0]?.id as string,
      ),
    ).toBe(1);
  });

  it("a spent ticket is refused tool_unavailable, audited grant_exhausted, nothing delivered", async () => {
    const r = ledgerRig();
    await r.ticket("bob");
    const turn = await r.kernel.openTurnAuthority(ctx());
    await turn.sendMessage({ recipient: "bob", payload: "1", callId: "c-1" });
    const second = await turn.sendMessage({ recipient: "bob", payload: "2", callId: "c-2" });
    expect(second).toEqual({ status: "denied", code: "tool_unavailable" });
    expect(r.delivered).toEqual(["c-1"]);
    await r.kernel.drain?.();
    expect(r.audit.events.at(-1)).toMatchObject({ callId: "c-2", reason: "grant_exhausted" });
  });

  it("a ticket spent under an older view does not refuse an act another ticket covers", async () => {
    const r = ledgerRig();
    await r.ticket("bob");
    const first = await r.kernel.openTurnAuthority(ctx());
    expect((await first.sendMessage({ recipient: "bob", payload: 1, callId: "v-1" })).status).toBe(
      "delivered",
    );
    // A second ticket changes the grant set: the next turn's view is new and knows nothing spent.
    await r.ticket("bob");
    const second = await r.kernel.openTurnAuthority(ctx());
    const sent = await second.sendMessage(
      { recipient: "bob", payload: 2, callId: "v-2" },
      claimOf("v-2"),
    );
    expect(sent).toMatchObject({ status: "delivered" });
    const third = await second.sendMessage({ recipient: "bob", payload: 3, callId: "v-3" });
    expect(third).toEqual({ status: "denied", code: "tool_unavailable" });
    expect(r.delivered).toEqual(["v-1", "v-2"]);
  });

  it("20 turns racing for one ticket: one delivery, 19 exhausted refusals, one event each", async () => {
    const r = ledgerRig();
    await r.ticket("bob");
    const results = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const turn = await r.kernel.openTurnAuthority(ctx({ traceId: `t-${i}` }));
        return turn.sendMessage({ recipient: "bob", payload: i, callId: `race-${i}` });
      }),
    );
    expect(results.filter((x) => x.status === "delivered")).toHaveLength(1);
    expect(results.filter((x) => x.status === "denied")).toHaveLength(19);
    expect(r.delivered).toHaveLength(1);
    expect(r.audit.events).toHaveLength(20);
    expect(r.audit.events.filter((e) => e.outcome === "allowed")).toHaveLength(1);
  });

  it("a wrong recipient with a claim is one act: the claim settled denied with its refusal", async () => {
    const r = ledgerRig();
    await r.ticket("bob");
    const turn = await r.kernel.openTurnAuthority(ctx());
    const wrong = await turn.sendMessage(
      { recipient: "mallory", payload: "x", callId: "w-1" },
      claimOf("w-1"),
    );
    expect(wrong).toEqual({ status: "denied", code: "no_matching_grant" });
    expect(r.acts.acts).toHaveLength(1);
    const claim = await r.claims.get({ session: "svc", functionCallId: "w-1" });
    expect(claim?.receipt?.status).toBe("denied");
    expect(claim?.answer).toEqual({ status: "denied", code: "no_matching_grant" });
    expect(r.delivered).toEqual([]);
  });

  it("a denial without a claim is no act: its event is written after the answer", async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const inner = new InMemoryAuditSink();
    const slow: AuditSink = {
      append: async (event: AuditEvent) => {
        await gate;
        inner.append(event);
      },
    };
    const r = ledgerRig({ audit: slow });
    const turn = await r.kernel.openTurnAuthority(ctx());
    const denied = await turn.sendMessage({ recipient: "nobody", payload: "x", callId: "d-1" });
    expect(denied).toEqual({ status: "denied", code: "tool_unavailable" });
    expect(r.acts.acts).toHaveLength(0);
    expect(inner.events).toHaveLength(0);
    release();
    await r.kernel.drain?.();
    expect(inner.events.map((e) => e.callId)).toEqual(["d-1"]);
  });

  it('denials: "before-reply" writes the denial before the answer', async () => {
    const order: string[] = [];
    const sink: AuditSink = {
      append: async () => {
        await new Promise((resolve) => setTimeout(resolve, 5));
        order.push("written");
      },
    };
    const r = ledgerRig({ audit: sink, denials: "before-reply" });
    const turn = await r.kernel.openTurnAuthority(ctx());
    await turn.sendMessage({ recipient: "nobody", payload: "x" });
    order.push("answered");
    expect(order).toEqual(["written", "answered"]);
  });

  it("a sink that fails a late denial fails the next denials closed until it writes again, and the late one is kept", async () => {
    let down = true;
    const inner = new InMemoryAuditSink();
    const flaky: AuditSink = {
      append: async (event: AuditEvent) => {
        if (down) throw new Error("disk full");
        inner.append(event);
      },
    };
    const r = ledgerRig({ audit: flaky });
    const turn = await r.kernel.openTurnAuthority(ctx());
    await turn.sendMessage({ recipient: "nobody", payload: "x", callId: "kept-1" });
    await r.kernel.drain?.();
    expect(r.kernel.auditState?.()).toBe("failing");
    await expect(
      turn.sendMessage({ recipient: "nobody", payload: "x", callId: "refused-2" }),
    ).rejects.toMatchObject({ code: "audit_unavailable" });
    down = false;
    expect(await turn.sendMessage({ recipient: "nobody", payload: "x", callId: "ok-3" })).toEqual({
      status: "denied",
      code: "tool_unavailable",
    });
    expect(r.kernel.auditState?.()).toBe("ok");
    expect(inner.events.map((e) => e.callId)).toEqual(["kept-1", "ok-3"]);
    r.kernel.close?.();
  });

  it("a ledger that cannot record fails the call with its code: nothing spent or delivered", async () => {
    const r = ledgerRig();
    await r.ticket("bob");
    const down: ActLedger = {
      record: async () => {
        throw Object.assign(new Error("down"), { code: "ECONNREFUSED" });
      },
    };
    const kernel = createKernel({
      grants: r.grants,
      usage: r.usage,
      audit: r.audit,
      acts: down,
      transport: { deliver: async () => ({ status: "delivered" }) },
    });
    const turn = await kernel.openTurnAuthority(ctx());
    await expect(
      turn.sendMessage({ recipient: "bob", payload: "x", callId: "c" }, claimOf("c")),
    ).rejects.toMatchObject({ code: "store_unavailable" });
    expect(r.audit.events).toHaveLength(0);
  });

  it("a claim without a ledger is refused invalid_config, and so is a bad ledger", async () => {
    const r = rig();
    const turn = await r.kernel.openTurnAuthority(ctx());
    await expect(
      turn.sendMessage({ recipient: "bob", payload: "x" }, claimOf("c")),
    ).rejects.toMatchObject({ code: "invalid_config" });
    await expect(
      turn.authorize({ action: "a", resource: { namespace: "n", path: ["p"] } }, claimOf("c")),
    ).rejects.toMatchObject({
      code: "invalid_config",
    });
    expect(() => createKernel({ grants: r.grants, acts: {} as ActLedger })).toThrow(/act ledger/);
  });

  it("authorize over the ledger: allowed spends once with its claim; the retry collides", async () => {
    const r = ledgerRig();
    await r.grants.add(
      grant({
        id: "read-once",
        capabilities: [
          {
            resource: { namespace: "files", path: ["a"] },
            actions: ["files.read"],
            scope: "exact",
          },
        ],
        constraints: { maxUses: 1 },
      }),
    );
    const turn = await r.kernel.openTurnAuthority(ctx());
    const request = {
      action: "files.read",
      resource: { namespace: "files", path: ["a"] },
      callId: "z",
    };
    expect(await turn.authorize(request, claimOf("z"))).toEqual({
      status: "allowed",
      grantId: "read-once",
      callId: "z",
    });
    expect((await turn.authorize(request, claimOf("z"))).status).toBe("already_claimed");
    expect(await turn.authorize({ ...request, callId: "y" })).toEqual({
      status: "denied",
      code: "tool_unavailable",
    });
    expect(await r.usage.getUsage("ns-test", "read-once")).toBe(1);
  });
});
