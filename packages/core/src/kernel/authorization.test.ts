import { describe, expect, it } from "vitest";
import { brokenUsageStore, cap, ctx, grant, OWNER, rig, T0 } from "../../test/fixtures.js";

/** Every permission path of a decision, allowed and denied, through `turn.authorize`. */

const READ = { action: "files.read", resource: { namespace: "files", path: ["docs", "cell-3"] } };

async function decideOnce(
  setup: (r: ReturnType<typeof rig>) => Promise<unknown>,
  request: Parameters<
    Awaited<ReturnType<ReturnType<typeof rig>["kernel"]["openTurnAuthority"]>>["authorize"]
  >[0] = READ,
  context = ctx(),
  r = rig(),
) {
  await setup(r);
  const turn = await r.kernel.openTurnAuthority(context);
  const result = await turn.authorize({ ...request, callId: "call-1" });
  const event = r.audit.events.at(-1);
  return { result, event, r };
}

describe("authorization: each condition allowed and denied", () => {
  it("allows an exact capability by its issuer to its subject", async () => {
    const { result, event } = await decideOnce((r) =>
      r.grants.add(grant({ id: "read", capabilities: [cap(["docs", "cell-3"])] })),
    );
    expect(result).toEqual({ status: "allowed", grantId: "read", callId: "call-1" });
    expect(event).toMatchObject({
      outcome: "allowed",
      code: null,
      reason: "allowed",
      grantId: "read",
    });
  });

  it("denies with no grant at all: tool_unavailable, audit no_capability", async () => {
    const { result, event } = await decideOnce(async () => undefined);
    expect(result).toEqual({ status: "denied", code: "tool_unavailable" });
    expect(event).toMatchObject({ outcome: "denied", reason: "no_capability" });
  });

  it("denies a grant issued by another authority (issuer_mismatch)", async () => {
    const { result, event } = await decideOnce((r) =>
      r.grants.add(grant({ issuer: "someone-else", capabilities: [cap(["docs", "cell-3"])] })),
    );
    expect(result).toEqual({ status: "denied", code: "tool_unavailable" });
    expect(event?.reason).toBe("issuer_mismatch");
  });

  it("ignores a grant held by another subject", async () => {
    const { result, event } = await decideOnce((r) =>
      r.grants.add(grant({ subject: "other-agent", capabilities: [cap(["docs", "cell-3"])] })),
    );
    expect(result.status).toBe("denied");
    expect(event?.reason).toBe("no_capability");
  });

  it("ignores a grant in another namespace", async () => {
    const { result } = await decideOnce((r) =>
      r.grants.add(grant({ namespaceId: "ns-other", capabilities: [cap(["docs", "cell-3"])] })),
    );
    expect(result.status).toBe("denied");
  });

  it("denies before notBefore and from expiresAt on; allows inside the window", async () => {
    const window = {
      notBefore: new Date(T0).toISOString(),
      expiresAt: new Date(T0 + 1000).toISOString(),
    };
    const at = async (ms: number) =>
      decideOnce(
        (r) =>
          r.grants.add(grant({ constraints: window, capabilities: [cap(["docs", "cell-3"])] })),
        READ,
        ctx({ now: new Date(ms).toISOString() }),
      );
    const early = await at(T0 - 1);
    expect(early.result.status).toBe("denied");
    expect(early.event?.reason).toBe("not_yet_valid");
    expect((await at(T0)).result.status).toBe("allowed");
    expect((await at(T0 + 999)).result.status).toBe("allowed");
    const late = await at(T0 + 1000);
    expect(late.result.status).toBe("denied");
    expect(late.event?.reason).toBe("expired");
  });

  it("a notBefore or issuedAt with digits past the millisecond opens at the next one, not before", async () => {
    const T = new Date(T0).toISOString().slice(0, -1); // "….000", then the extra digits
    const at = async (constraints: object, issuedAt: string | undefined, ms: number) =>
      decideOnce(
        (r) =>
          r.grants.add(
            grant({
              constraints,
              ...(issuedAt === undefined ? {} : { issuedAt }),
              capabilities: [cap(["docs", "cell-3"])],
            }),
          ),
        READ,
        ctx({ now: new Date(ms).toISOString() }),
      );
    for (const [constraints, issuedAt] of [
      [{ notBefore: `${T}5Z` }, undefined],
      [{}, `${T}0001Z`],
      [{ notBefore: `${T}999999Z` }, undefined],
    ] as const) {
      const early = await at(constraints, issuedAt, T0);
      expect(early.event?.reason).toBe("not_yet_valid");
      expect((await at(constraints, issuedAt, T0 + 1)).result.status).toBe("allowed");
    }
    // Zeros past the millisecond are the millisecond itself.
    expect((await at({ notBefore: `${T}000Z` }, undefined, T0)).result.status).toBe("allowed");
  });

  it("treats a grant issued in the future as not yet valid until its issue time", async () => {
    const issued = (ms: number) =>
      decideOnce(
        (r) =>
          r.grants.add(
            grant({
              issuedAt: new Date(T0 + 1000).toISOString(),
              capabilities: [cap(["docs", "cell-3"])],
            }),
          ),
        READ,
        ctx({ now: new Date(ms).toISOString() }),
      );
    const early = await issued(T0 + 999);
    expect(early.result).toEqual({ status: "denied", code: "tool_unavailable" });
    expect(early.event?.reason).toBe("not_yet_valid");
    expect((await issued(T0 + 1000)).result.status).toBe("allowed");
  });

  it("hides a tool whose only grant is issued in the future", async () => {
    const r = rig();
    await r.grants.add(
      grant({
        issuedAt: new Date(T0 + 1000).toISOString(),
        capabilities: [cap(["docs", "cell-3"])],
      }),
    );
    const turn = await r.kernel.openTurnAuthority(ctx());
    expect(await turn.listTools()).toEqual([]);
    r.clock.advance(1000);
    expect(await turn.listTools()).toEqual(["files.read"]);
  });

  it("a revokedAt in the future revokes now (revocation is never scheduled)", async () => {
    const { result, event } = await decideOnce((r) =>
      r.grants.add(
        grant({
          revokedAt: new Date(T0 + 3_600_000).toISOString(),
          capabilities: [cap(["docs", "cell-3"])],
        }),
      ),
    );
    expect(result).toEqual({ status: "denied", code: "tool_unavailable" });
    expect(event?.reason).toBe("revoked");
  });

  it("uses the kernel clock per decision when the context fixes no instant", async () => {
    const r = rig();
    await r.grants.add(
      grant({
        constraints: { expiresAt: new Date(T0 + 10).toISOString() },
        capabilities: [cap(["docs", "cell-3"])],
      }),
    );
    const turn = await r.kernel.openTurnAuthority(ctx());
    expect((await turn.authorize(READ)).status).toBe("allowed");
    r.clock.advance(10);
    expect(await turn.authorize(READ)).toEqual({ status: "denied", code: "tool_unavailable" });
    expect(r.audit.events.at(-1)?.reason).toBe("expired");
  });

  it("allows a listed purpose, denies another purpose and a missing one", async () => {
    const setup = (r: ReturnType<typeof rig>) =>
      r.grants.add(
        grant({ constraints: { purposes: ["review"] }, capabilities: [cap(["docs", "cell-3"])] }),
      );
    expect((await decideOnce(setup, READ, ctx({ purpose: "review" }))).result.status).toBe(
      "allowed",
    );
    const other = await decideOnce(setup, READ, ctx({ purpose: "marketing" }));
    expect(other.result.status).toBe("denied");
    expect(other.event?.reason).toBe("purpose_mismatch");
    const none = await decideOnce(setup, READ, ctx());
    expect(none.event?.reason).toBe("purpose_mismatch");
  });

  it("denies a revoked grant (revoked) and keeps the others", async () => {
    const r = rig();
    await r.grants.add(grant({ id: "a", capabilities: [cap(["docs", "cell-3"])] }));
    await r.grants.add(grant({ id: "b", capabilities: [cap(["docs", "cell-4"])] }));
    await r.grants.revoke("ns-test", "a");
    const turn = await r.kernel.openTurnAuthority(ctx());
    expect(await turn.authorize(READ)).toEqual({ status: "denied", code: "no_matching_grant" });
    expect(r.audit.events.at(-1)?.reason).toBe("revoked");
    const other = { ...READ, resource: { namespace: "files", path: ["docs", "cell-4"] } };
    expect((await turn.authorize(other)).status).toBe("allowed");
  });

  it("compares path segments whole: cell-3 never covers cell-30, nor cell-30 cell-3", async () => {
    const r = rig();
    await r.grants.add(
      grant({ capabilities: [cap(["docs", "cell-3"], { scope: "descendants" })] }),
    );
    const turn = await r.kernel.openTurnAuthority(ctx());
    const at = (path: string[]) =>
      turn.authorize({ action: "files.read", resource: { namespace: "files", path } });
    expect((await at(["docs", "cell-3"])).status).toBe("allowed");
    expect((await at(["docs", "cell-3", "row-1"])).status).toBe("allowed");
    expect(await at(["docs", "cell-30"])).toEqual({ status: "denied", code: "no_matching_grant" });
    expect((await at(["docs", "cell-3/row-1"])).status).toBe("denied");
    expect((await at(["docs"])).status).toBe("denied");
    expect((await at(["docs", "cell-"])).status).toBe("denied");
  });

  it("exact scope covers only the path itself, not its descendants", async () => {
    const r = rig();
    await r.grants.add(grant({ capabilities: [cap(["docs"])] }));
    const turn = await r.kernel.openTurnAuthority(ctx());
    const at = (path: string[]) =>
      turn.authorize({ action: "files.read", resource: { namespace: "files", path } });
    expect((await at(["docs"])).status).toBe("allowed");
    expect((await at(["docs", "cell-3"])).status).toBe("denied");
  });

  it("descendants of the root cover every path of the namespace, not another namespace", async () => {
    const r = rig();
    await r.grants.add(grant({ capabilities: [cap([], { scope: "descendants" })] }));
    const turn = await r.kernel.openTurnAuthority(ctx());
    expect((await turn.authorize(READ)).status).toBe("allowed");
    const elsewhere = {
      action: "files.read",
      resource: { namespace: "mail", path: ["docs", "cell-3"] },
    };
    expect((await turn.authorize(elsewhere)).status).toBe("denied");
  });

  it("checks the action: a read grant never allows a write", async () => {
    const { result, event } = await decideOnce(
      (r) => r.grants.add(grant({ capabilities: [cap(["docs", "cell-3"])] })),
      { ...READ, action: "files.write" },
    );
    expect(result).toEqual({ status: "denied", code: "tool_unavailable" });
    expect(event?.reason).toBe("no_capability");
  });

  it("matches the resource owner: a request may restate the turn's owner, never name another", async () => {
    const r = rig();
    await r.grants.add(grant({ capabilities: [cap(["mine"], { owner: OWNER })] }));
    await r.grants.add(grant({ capabilities: [cap(["shared"])] }));
    const turn = await r.kernel.openTurnAuthority(ctx());
    const at = (path: string[], owner?: string) =>
      turn.authorize({
        action: "files.read",
        resource: { namespace: "files", path, ...(owner === undefined ? {} : { owner }) },
      });
    expect((await at(["mine"], OWNER)).status).toBe("allowed");
    expect((await at(["mine"])).status).toBe("allowed");
    expect((await at(["mine"], "mallory")).status).toBe("denied");
    // An owner-less capability is bound to the turn's owner (owner-binding.test.ts has more).
    expect((await at(["shared"], OWNER)).status).toBe("allowed");
    expect((await at(["shared"])).status).toBe("allowed");
    expect((await at(["shared"], "anyone")).status).toBe("denied");
  });
});

describe("authorization: grants with several capabilities and actions", () => {
  it("covers each action on each named path, and one budget spans them all", async () => {
    const r = rig();
    await r.grants.add(
      grant({
        id: "multi",
        constraints: { maxUses: 2 },
        capabilities: [
          cap(["docs", "cell-3"], { actions: ["files.read", "files.write"] }),
          cap(["docs", "cell-4"], { actions: ["files.read"] }),
        ],
      }),
    );
    const turn = await r.kernel.openTurnAuthority(ctx());
    const at = (action: string, leaf: string) =>
      turn.authorize({ action, resource: { namespace: "files", path: ["docs", leaf] } });
    expect(await turn.listTools()).toEqual(["files.read", "files.write"]);
    expect((await at("files.write", "cell-4")).status).toBe("denied"); // not granted there
    expect((await at("files.write", "cell-3")).status).toBe("allowed");
    expect((await at("files.read", "cell-4")).status).toBe("allowed");
    expect(await at("files.read", "cell-3")).toEqual({
      status: "denied",
      code: "tool_unavailable",
    });
    expect(r.audit.events.at(-1)?.reason).toBe("grant_exhausted");
    expect(await r.usage.getUsage("ns-test", "multi")).toBe(2);
  });
});

describe("authorization: bounded grants and usage", () => {
  it("consumes one use per allowed decision, then refuses grant_exhausted", async () => {
    const r = rig();
    await r.grants.add(
      grant({ id: "twice", constraints: { maxUses: 2 }, capabilities: [cap(["docs", "cell-3"])] }),
    );
    const turn = await r.kernel.openTurnAuthority(ctx());
    expect((await turn.authorize(READ)).status).toBe("allowed");
    expect((await turn.authorize(READ)).status).toBe("allowed");
    expect(await turn.authorize(READ)).toEqual({ status: "denied", code: "tool_unavailable" });
    expect(r.audit.events.at(-1)).toMatchObject({ reason: "grant_exhausted", grantId: "twice" });
    expect(await r.usage.getUsage("ns-test", "twice")).toBe(2);
  });

  it("prefers an unbounded grant and spends nothing when one covers the act", async () => {
    const r = rig();
    await r.grants.add(
      grant({
        id: "bounded",
        constraints: { maxUses: 1 },
        capabilities: [cap(["docs", "cell-3"])],
      }),
    );
    await r.grants.add(grant({ id: "open", capabilities: [cap(["docs", "cell-3"])] }));
    const turn = await r.kernel.openTurnAuthority(ctx());
    expect(await turn.authorize(READ)).toMatchObject({ status: "allowed", grantId: "open" });
    expect(await r.usage.getUsage("ns-test", "bounded")).toBe(0);
  });

  it("a refused call spends nothing: wrong resource, wrong purpose, expired", async () => {
    const r = rig();
    await r.grants.add(
      grant({
        id: "t",
        constraints: {
          maxUses: 1,
          purposes: ["review"],
          expiresAt: new Date(T0 + 5).toISOString(),
        },
        capabilities: [cap(["docs", "cell-3"])],
      }),
    );
    const review = await r.kernel.openTurnAuthority(ctx({ purpose: "review" }));
    await review.authorize({ ...READ, resource: { namespace: "files", path: ["docs", "cell-4"] } });
    const marketing = await r.kernel.openTurnAuthority(ctx({ purpose: "marketing" }));
    await marketing.authorize(READ);
    r.clock.advance(5);
    await review.authorize(READ);
    expect(r.audit.events.map((e) => e.reason)).toEqual([
      "no_capability",
      "purpose_mismatch",
      "expired",
    ]);
    expect(await r.usage.getUsage("ns-test", "t")).toBe(0);
  });

  it("fails closed with no usage store: tool_unavailable, audit usage_store_unavailable", async () => {
    const r = rig({ usage: null });
    await r.grants.add(
      grant({ constraints: { maxUses: 1 }, capabilities: [cap(["docs", "cell-3"])] }),
    );
    const turn = await r.kernel.openTurnAuthority(ctx());
    expect(await turn.authorize(READ)).toEqual({ status: "denied", code: "tool_unavailable" });
    expect(r.audit.events.at(-1)?.reason).toBe("usage_store_unavailable");
    expect(await turn.listTools()).toEqual([]);
  });

  it("still allows unbounded grants with no usage store", async () => {
    const r = rig({ usage: null });
    await r.grants.add(grant({ capabilities: [cap(["docs", "cell-3"])] }));
    const turn = await r.kernel.openTurnAuthority(ctx());
    expect((await turn.authorize(READ)).status).toBe("allowed");
  });

  it("fails closed when the usage store throws, on consume and on discovery", async () => {
    const r = rig({ usage: brokenUsageStore });
    await r.grants.add(
      grant({ constraints: { maxUses: 1 }, capabilities: [cap(["docs", "cell-3"])] }),
    );
    const turn = await r.kernel.openTurnAuthority(ctx());
    expect(await turn.authorize(READ)).toEqual({ status: "denied", code: "tool_unavailable" });
    const other = { ...READ, resource: { namespace: "files", path: ["elsewhere"] } };
    expect(await turn.authorize(other)).toEqual({ status: "denied", code: "tool_unavailable" });
    expect(r.audit.events.map((e) => e.reason)).toEqual([
      "usage_store_unavailable",
      "usage_store_unavailable",
    ]);
    expect(await turn.listTools()).toEqual([]);
  });

  it("lists a tool while an unspent use remains, and hides it once spent", async () => {
    const r = rig();
    await r.grants.add(
      grant({ id: "once", constraints: { maxUses: 1 }, capabilities: [cap(["docs", "cell-3"])] }),
    );
    const turn = await r.kernel.openTurnAuthority(ctx());
    expect(await turn.listTools()).toEqual(["files.read"]);
    expect(await r.usage.getUsage("ns-test", "once")).toBe(0); // discovery spends nothing
    await turn.authorize(READ);
    expect(await turn.listTools()).toEqual([]);
  });
});
