import { describe, expect, it } from "vitest";
import { ctx, grant, NS, rig } from "../../test/fixtures.js";
import {
  createKernel,
  explain,
  type GrantUsageStore,
  InMemoryAuditSink,
  InMemoryGrantStore,
  InMemoryGrantUsageStore,
  type MessageTransport,
  messageSendCapability,
  releaseUse,
} from "../index.js";

/**
 * A delivery the transport says never left (`sent: false`) gives its use back, audited as its
 * own `use_returned` event; one that may have left keeps it spent.
 */

function ticket(id: string) {
  return grant({
    id,
    constraints: { maxUses: 1 },
    capabilities: [messageSendCapability("bob", "alice")],
  });
}

/** Fails every delivery as told, then delivers once `down` is false. */
function switchable(answer: { code: string; sent?: boolean }) {
  const state = { down: true, delivered: 0 };
  const transport: MessageTransport = {
    deliver: async () => {
      if (state.down) return { status: "failed", ...answer };
      state.delivered++;
      return { status: "delivered" };
    },
  };
  return { state, transport };
}

describe("a delivery that sent nothing", () => {
  it("gives the single-use ticket back: delivery_failed, then use_returned; the ticket sends later", async () => {
    const { state, transport } = switchable({ code: "unreachable", sent: false });
    const r = rig({ extra: { transport } });
    await r.grants.add(ticket("t"));
    const turn = await r.kernel.openTurnAuthority(ctx());
    expect(await turn.sendMessage({ recipient: "bob", payload: "hi", callId: "c1" })).toEqual({
      status: "denied",
      code: "delivery_failed",
    });
    expect(await r.usage.getUsage(NS, "t")).toBe(0);
    expect(r.audit.events.map((e) => [e.reason, e.code, e.grantId])).toEqual([
      ["allowed", null, "t"],
      ["delivery_failed", "delivery_failed", "t"],
      ["use_returned", "delivery_failed", "t"],
    ]);
    expect(r.audit.events[1]?.detail).toBe("transport answered unreachable; nothing was sent");
    const explained = await explain(r.audit, "c1");
    expect(explained.verdict).toBe("use_returned");
    expect(explained.summary).toMatch(/use was given back/);
    // The same turn, and a later one of the same kernel (its cached index), spend it once.
    state.down = false;
    expect((await turn.sendMessage({ recipient: "bob", payload: "hi" })).status).toBe("delivered");
    expect(await turn.sendMessage({ recipient: "bob", payload: "hi" })).toEqual({
      status: "denied",
      code: "tool_unavailable",
    });
    expect(state.delivered).toBe(1);
  });

  it("a later turn of the same kernel finds the ticket unspent again", async () => {
    const { state, transport } = switchable({ code: "unreachable", sent: false });
    const r = rig({ extra: { transport } });
    await r.grants.add(ticket("t"));
    const first = await r.kernel.openTurnAuthority(ctx());
    await first.sendMessage({ recipient: "bob", payload: "hi" });
    await first.close();
    state.down = false;
    const second = await r.kernel.openTurnAuthority(ctx());
    expect(await second.listTools()).toEqual(["messages.send"]);
    expect((await second.sendMessage({ recipient: "bob", payload: "hi" })).status).toBe(
      "delivered",
    );
    expect(await r.usage.getUsage(NS, "t")).toBe(1);
  });

  it.each([
    ["no sent flag", { code: "timeout" }],
    ["sent: true", { code: "receiver_error", sent: true }],
  ])("%s: the use stays spent and nothing is returned", async (_t, answer) => {
    const { transport } = switchable(answer);
    const r = rig({ extra: { transport } });
    await r.grants.add(ticket("t"));
    const turn = await r.kernel.openTurnAuthority(ctx());
    expect((await turn.sendMessage({ recipient: "bob", payload: "hi" })).status).toBe("denied");
    expect(await r.usage.getUsage(NS, "t")).toBe(1);
    expect(r.audit.events.map((e) => e.reason)).toEqual(["allowed", "delivery_failed"]);
  });

  it("a usage store without release keeps the use spent (fails closed)", async () => {
    const inner = new InMemoryGrantUsageStore();
    const usage: GrantUsageStore = {
      getUsage: (ns, id) => inner.getUsage(ns, id),
      tryConsume: (ns, id, max) => inner.tryConsume(ns, id, max),
    };
    const { transport } = switchable({ code: "unreachable", sent: false });
    const grants = new InMemoryGrantStore();
    await grants.add(ticket("t"));
    const audit = new InMemoryAuditSink();
    const turn = await createKernel({ grants, usage, audit, transport }).openTurnAuthority(ctx());
    expect((await turn.sendMessage({ recipient: "bob", payload: "hi" })).status).toBe("denied");
    expect(await inner.getUsage(NS, "t")).toBe(1);
    expect(audit.events.map((e) => e.reason)).toEqual(["allowed", "delivery_failed"]);
  });

  it("releaseUse beside the kernel (the MCP gateway's path): the kernel's cache forgets the spent mark", async () => {
    const r = rig();
    await r.grants.add(
      grant({
        id: "once",
        constraints: { maxUses: 1 },
        capabilities: [
          {
            resource: { namespace: "files", path: ["a"] },
            actions: ["files.read"],
            scope: "exact",
          },
        ],
      }),
    );
    const read = { action: "files.read", resource: { namespace: "files", path: ["a"] } };
    const first = await r.kernel.openTurnAuthority(ctx());
    expect((await first.authorize(read)).status).toBe("allowed");
    expect((await first.authorize(read)).status).toBe("denied");
    expect(await releaseUse(r.usage, NS, "once")).toEqual({ released: true, used: 0 });
    const second = await r.kernel.openTurnAuthority(ctx());
    expect((await second.authorize(read)).status).toBe("allowed");
    expect(await releaseUse(r.usage, NS, "never-used")).toEqual({ released: false, used: 0 });
  });
});
