import { describe, expect, it } from "vitest";
import { cap, ctx, grant, NS, OWNER, T0 } from "../../test/fixtures.js";
import {
  createKernel,
  explain,
  InMemoryAuditSink,
  InMemoryGrantStore,
  InMemoryGrantUsageStore,
  InProcessTransport,
  messageSendCapability,
} from "../index.js";
import { ManualClock } from "../testing.js";

/**
 * A kernel with no transport has nowhere to deliver: it must not offer the send tool, must
 * refuse a send with one code before any grant is used, and explain must not claim the act
 * was authorized and spent.
 */
async function setup(withTransport: boolean) {
  const grants = new InMemoryGrantStore();
  const usage = new InMemoryGrantUsageStore();
  const audit = new InMemoryAuditSink();
  const transport = InProcessTransport.echo();
  const kernel = createKernel({
    grants,
    usage,
    audit,
    clock: new ManualClock(T0),
    ...(withTransport ? { transport } : {}),
  });
  await grants.add(
    grant({
      id: "ticket",
      capabilities: [messageSendCapability("bob", OWNER)],
      constraints: { maxUses: 1 },
    }),
  );
  await grants.add(grant({ id: "reader", capabilities: [cap(["doc"])] }));
  return { kernel, usage, audit, transport };
}

describe("a kernel without a transport", () => {
  it("does not list messages.send; other tools stay listed", async () => {
    const { kernel } = await setup(false);
    await using turn = await kernel.openTurnAuthority(ctx());
    expect(await turn.listTools()).toEqual(["files.read"]);
  });

  it("refuses a send tool_unavailable, spends nothing, and explain says there is no transport", async () => {
    const { kernel, usage, audit } = await setup(false);
    await using turn = await kernel.openTurnAuthority(ctx());
    const answer = await turn.sendMessage({ recipient: "bob", payload: "hi", callId: "s-1" });
    expect(answer).toEqual({ status: "denied", code: "tool_unavailable" });
    expect(await usage.getUsage(NS, "ticket")).toBe(0);
    expect(audit.events.map((e) => [e.outcome, e.code, e.reason])).toEqual([
      ["denied", "tool_unavailable", "no_transport"],
    ]);
    const told = await explain(audit, "s-1");
    expect(told.verdict).toBe("no_transport");
    expect(told.summary).not.toMatch(/spent|authorized/);
  });

  it("with a transport, the same ticket is listed and delivers", async () => {
    const { kernel, usage } = await setup(true);
    await using turn = await kernel.openTurnAuthority(ctx());
    expect(await turn.listTools()).toEqual(["files.read", "messages.send"]);
    const answer = await turn.sendMessage({ recipient: "bob", payload: "hi" });
    expect(answer.status).toBe("delivered");
    expect(await usage.getUsage(NS, "ticket")).toBe(1);
  });
});
