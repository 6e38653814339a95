import { describe, expect, it } from "vitest";
import { cap, ctx, grant, OWNER, rig } from "../../test/fixtures.js";
import { type AccessContext, MESSAGE_SEND_ACTION, messageSendCapability } from "../index.js";

/**
 * A turn acts for one owner, `ctx.owner` (or for nobody). A capability naming no owner is bound
 * to that owner; a request may restate the turn's owner, never name another.
 */

type Rig = ReturnType<typeof rig>;

async function turnWith(r: Rig, context: Partial<AccessContext> = {}) {
  const turn = await r.kernel.openTurnAuthority(ctx(context));
  return (path: string[], owner?: string) =>
    turn.authorize({
      action: "files.read",
      resource: { namespace: "files", path, ...(owner === undefined ? {} : { owner }) },
    });
}

describe("owner binding: a capability without owner", () => {
  it("covers the turn's owner, restated or implied, and refuses another owner", async () => {
    const r = rig();
    await r.grants.add(grant({ id: "shared", capabilities: [cap(["shared"])] }));
    const at = await turnWith(r);
    expect(await at(["shared"], OWNER)).toMatchObject({ status: "allowed", grantId: "shared" });
    expect((await at(["shared"])).status).toBe("allowed");
    expect(await at(["shared"], "mallory")).toEqual({
      status: "denied",
      code: "no_matching_grant",
    });
    expect(r.audit.events.at(-1)).toMatchObject({
      outcome: "denied",
      reason: "owner_mismatch",
      owner: OWNER,
      resource: "files:/shared",
    });
    expect(r.audit.events.at(-1)?.grantId).toBeUndefined();
  });

  it("in a turn with no owner, covers requests naming no owner and refuses any named owner", async () => {
    const r = rig();
    await r.grants.add(grant({ capabilities: [cap(["shared"])] }));
    const at = await turnWith(r, { owner: undefined });
    expect((await at(["shared"])).status).toBe("allowed");
    expect(await at(["shared"], OWNER)).toEqual({ status: "denied", code: "no_matching_grant" });
    expect(r.audit.events.at(-1)?.reason).toBe("owner_mismatch");
  });

  it("a refused foreign-owner request spends nothing", async () => {
    const r = rig();
    await r.grants.add(
      grant({ id: "once", constraints: { maxUses: 1 }, capabilities: [cap(["shared"])] }),
    );
    const at = await turnWith(r);
    expect((await at(["shared"], "mallory")).status).toBe("denied");
    expect(await r.usage.getUsage("ns-test", "once")).toBe(0);
    expect((await at(["shared"], OWNER)).status).toBe("allowed");
  });

  it("binds a message capability without owner to the turn's owner", async () => {
    const r = rig();
    const unowned = { ...messageSendCapability("bob", OWNER), resource: messagesTo("bob") };
    await r.grants.add(grant({ capabilities: [unowned] }));
    for (const owner of [OWNER, "bob-owner", undefined]) {
      const turn = await r.kernel.openTurnAuthority(ctx({ owner }));
      expect((await turn.sendMessage({ recipient: "bob", payload: "q" })).status).toBe("delivered");
      expect(r.audit.events.at(-1)?.owner).toBe(owner);
    }
  });
});

describe("owner binding: a capability naming an owner", () => {
  it("covers that owner's turn, whether the request restates the owner or not", async () => {
    const r = rig();
    await r.grants.add(grant({ capabilities: [cap(["mine"], { owner: OWNER })] }));
    const at = await turnWith(r);
    expect((await at(["mine"], OWNER)).status).toBe("allowed");
    expect((await at(["mine"])).status).toBe("allowed");
    expect(await at(["mine"], "mallory")).toEqual({ status: "denied", code: "no_matching_grant" });
    expect(r.audit.events.at(-1)?.reason).toBe("owner_mismatch");
  });

  it("never counts in another owner's turn (owner X, ctx.owner Y)", async () => {
    const r = rig();
    await r.grants.add(grant({ id: "alices", capabilities: [cap(["mine"], { owner: OWNER })] }));
    const turn = await r.kernel.openTurnAuthority(ctx({ owner: "bob" }));
    const at = (owner?: string) =>
      turn.authorize({
        action: "files.read",
        resource: { namespace: "files", path: ["mine"], ...(owner ? { owner } : {}) },
      });
    // Alice's grant is not reach for Bob's turn: the tool is hidden.
    expect(await turn.listTools()).toEqual([]);
    expect(await at("bob")).toEqual({ status: "denied", code: "tool_unavailable" });
    expect(r.audit.events.at(-1)).toMatchObject({ reason: "owner_mismatch", owner: "bob" });
    // Bob's audit does not name Alice's grant.
    expect(r.audit.events.at(-1)?.grantId).toBeUndefined();
    expect(await at()).toEqual({ status: "denied", code: "tool_unavailable" });
    expect(await at(OWNER)).toEqual({ status: "denied", code: "no_matching_grant" });
    expect(r.audit.events.map((e) => e.reason)).toEqual([
      "owner_mismatch",
      "owner_mismatch",
      "owner_mismatch",
    ]);
  });

  it("never counts in a turn with no owner, even for a request naming that owner", async () => {
    const r = rig();
    await r.grants.add(grant({ capabilities: [cap(["mine"], { owner: OWNER })] }));
    const at = await turnWith(r, { owner: undefined });
    expect(await at(["mine"], OWNER)).toEqual({ status: "denied", code: "no_matching_grant" });
    expect(await at(["mine"])).toEqual({ status: "denied", code: "tool_unavailable" });
    expect(r.audit.events.map((e) => e.reason)).toEqual(["owner_mismatch", "owner_mismatch"]);
  });

  it("the turn's own grant still decides when another owner's grant names the same path", async () => {
    const r = rig();
    await r.grants.add(grant({ id: "alices", capabilities: [cap(["doc"], { owner: OWNER })] }));
    await r.grants.add(grant({ id: "bobs", capabilities: [cap(["doc"], { owner: "bob" })] }));
    const at = await turnWith(r, { owner: "bob" });
    expect(await at(["doc"])).toMatchObject({ status: "allowed", grantId: "bobs" });
    expect(await at(["other"])).toEqual({ status: "denied", code: "no_matching_grant" });
    expect(r.audit.events.at(-1)?.reason).toBe("no_capability");
  });

  it("a send under another owner's ticket is refused owner_mismatch, and spends nothing", async () => {
    const r = rig();
    await r.grants.add(
      grant({
        id: "t",
        constraints: { maxUses: 1 },
        capabilities: [messageSendCapability("carol", OWNER)],
      }),
    );
    const bobs = await r.kernel.openTurnAuthority(ctx({ owner: "bob" }));
    expect(await bobs.sendMessage({ recipient: "carol", payload: "q" })).toEqual({
      status: "denied",
      code: "tool_unavailable",
    });
    expect(r.audit.events.at(-1)).toMatchObject({
      action: MESSAGE_SEND_ACTION,
      reason: "owner_mismatch",
    });
    expect(await r.usage.getUsage("ns-test", "t")).toBe(0);
    const alices = await r.kernel.openTurnAuthority(ctx());
    expect((await alices.sendMessage({ recipient: "carol", payload: "q" })).status).toBe(
      "delivered",
    );
  });
});

function messagesTo(recipient: string) {
  return { namespace: "messages", path: [recipient] };
}
