import { describe, expect, it } from "vitest";
import { cap, ctx, grant, NS, rig } from "../../test/fixtures.js";
import {
  AuditEventSchema,
  createKernel,
  type GrantSource,
  InMemoryAuditSink,
  InMemoryGrantStore,
  InMemoryGrantUsageStore,
  InProcessTransport,
  isTesseraError,
  MESSAGE_SEND_ACTION,
  messageSendCapability,
} from "../index.js";

/** The lease: one read per turn, fail-closed loading, closing, requests and audit. */

const READ = { action: "files.read", resource: { namespace: "files", path: ["a"] } };

function countingSource(inner: GrantSource): GrantSource & { reads: number } {
  const source = {
    reads: 0,
    listGrants: async (namespaceId: string, subject: string) => {
      source.reads++;
      return inner.listGrants(namespaceId, subject);
    },
  };
  return source;
}

describe("opening a turn", () => {
  it("reads the grant source exactly once per turn, however many decisions it takes", async () => {
    const grants = new InMemoryGrantStore();
    await grants.add(grant({ capabilities: [cap(["a"])] }));
    const source = countingSource(grants);
    const kernel = createKernel({ grants: source });
    const turn = await kernel.openTurnAuthority(ctx());
    for (let i = 0; i < 20; i++) await turn.authorize(READ);
    await turn.listTools();
    expect(source.reads).toBe(1);
    await kernel.openTurnAuthority(ctx());
    expect(source.reads).toBe(2);
  });

  it.each([
    [
      "a grant missing its issuer",
      [{ ...grant({ capabilities: [cap(["a"])] }), issuer: undefined }],
    ],
    ["an unknown field", [{ ...grant({ capabilities: [cap(["a"])] }), admin: true }]],
    [
      "a non-ISO expiry",
      [grant({ constraints: { expiresAt: "tomorrow" }, capabilities: [cap(["a"])] })],
    ],
    ["a string instead of a grant", ["grant"]],
    ["a non-array", { length: 1, 0: grant({ capabilities: [cap(["a"])] }) }],
  ])("fails the whole turn closed on invalid material: %s", async (_name, material) => {
    const good = grant({ capabilities: [cap(["a"])] });
    const audit = new InMemoryAuditSink();
    const materialList = Array.isArray(material) ? [good, ...material] : material;
    const source: GrantSource = { listGrants: async () => materialList as unknown[] };
    const turn = await createKernel({ grants: source, audit }).openTurnAuthority(ctx());
    // The valid grant beside the bad one is not trusted either.
    expect(await turn.authorize(READ)).toEqual({ status: "denied", code: "authority_unavailable" });
    // Not an empty list, which a host would read as "nothing granted".
    await expect(turn.listTools()).rejects.toMatchObject({ code: "authority_unavailable" });
    expect(audit.events).toHaveLength(1);
    expect(audit.events[0]).toMatchObject({
      code: "authority_unavailable",
      reason: "authority_unavailable",
    });
  });

  it("fails the turn closed when the grant source throws", async () => {
    const source: GrantSource = {
      listGrants: async () => {
        throw new Error("database down");
      },
    };
    const turn = await createKernel({ grants: source }).openTurnAuthority(ctx());
    expect(await turn.authorize(READ)).toEqual({ status: "denied", code: "authority_unavailable" });
    await expect(turn.listTools()).rejects.toMatchObject({ code: "authority_unavailable" });
  });

  it("leaves out grants of another subject or namespace even if the source returns them", async () => {
    const foreign = [
      grant({ subject: "other", capabilities: [cap(["a"])] }),
      grant({ namespaceId: "ns-other", capabilities: [cap(["a"])] }),
    ];
    const audit = new InMemoryAuditSink();
    const turn = await createKernel({
      grants: { listGrants: async () => foreign },
      audit,
    }).openTurnAuthority(ctx());
    expect(await turn.authorize(READ)).toEqual({ status: "denied", code: "tool_unavailable" });
    expect(audit.events[0]?.reason).toBe("no_capability");
  });

  it("throws a typed invalid_input for a malformed context", async () => {
    const kernel = createKernel({ grants: new InMemoryGrantStore() });
    const error = await kernel.openTurnAuthority({ ...ctx(), actor: "" }).catch((e: unknown) => e);
    expect(isTesseraError(error, "invalid_input")).toBe(true);
  });

  it("refuses to build a kernel without a grant source (invalid_config)", () => {
    expect(() => createKernel({} as never)).toThrowError(
      expect.objectContaining({ code: "invalid_config" }),
    );
  });
});

describe("closing a turn", () => {
  it("refuses every decision once closed, and close is idempotent", async () => {
    const r = rig();
    await r.grants.add(grant({ capabilities: [cap(["a"])] }));
    await r.grants.add(grant({ capabilities: [messageSendCapability("bob", "alice")] }));
    const turn = await r.kernel.openTurnAuthority(ctx());
    expect((await turn.authorize(READ)).status).toBe("allowed");
    await turn.close();
    await turn.close();
    expect(turn.closed).toBe(true);
    expect(await turn.authorize(READ)).toEqual({ status: "denied", code: "turn_closed" });
    expect(await turn.sendMessage({ recipient: "bob", payload: "hi" })).toEqual({
      status: "denied",
      code: "turn_closed",
    });
    expect(await turn.listTools()).toEqual([]);
    expect(r.audit.events.map((e) => e.reason)).toEqual(["allowed", "turn_closed", "turn_closed"]);
    expect(r.transport.delivered).toHaveLength(0);
  });

  it("closes through Symbol.asyncDispose, called directly", async () => {
    const r = rig();
    const turn = await r.kernel.openTurnAuthority(ctx());
    await turn[Symbol.asyncDispose]();
    expect(turn.closed).toBe(true);
  });

  it("closes at the end of an `await using` block", async () => {
    const r = rig();
    let leaked: { closed: boolean } | undefined;
    {
      await using turn = await r.kernel.openTurnAuthority(ctx());
      leaked = turn;
      expect(turn.closed).toBe(false);
    }
    expect(leaked?.closed).toBe(true);
  });
});

describe("closing while a decision is in flight", () => {
  it("refuses the send turn_closed and delivers nothing; the consumed use stays spent", async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const inner = new InMemoryGrantUsageStore();
    const slow = {
      getUsage: (ns: string, id: string) => inner.getUsage(ns, id),
      tryConsume: async (ns: string, id: string, max: number) => {
        await gate;
        return inner.tryConsume(ns, id, max);
      },
    };
    const r = rig({ usage: slow });
    await r.grants.add(
      grant({
        id: "t",
        constraints: { maxUses: 1 },
        capabilities: [messageSendCapability("bob", "alice")],
      }),
    );
    const turn = await r.kernel.openTurnAuthority(ctx());
    const pending = turn.sendMessage({ recipient: "bob", payload: "hi", callId: "late" });
    await turn.close();
    release();
    expect(await pending).toEqual({ status: "denied", code: "turn_closed" });
    expect(r.transport.delivered).toHaveLength(0);
    expect(await inner.getUsage(NS, "t")).toBe(1);
    expect(r.audit.events).toHaveLength(1);
    expect(r.audit.events[0]).toMatchObject({
      callId: "late",
      reason: "turn_closed",
      grantId: "t",
    });
  });
});

describe("closing while the allowed event is being written", () => {
  /** A sink that holds every allowed event until released, then takes it. */
  function heldSink() {
    const inner = new InMemoryAuditSink();
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const sink = {
      events: inner.events,
      append: async (event: Parameters<InMemoryAuditSink["append"]>[0]) => {
        if (event.reason === "allowed") await held;
        return inner.append(event);
      },
      release: () => release(),
    };
    return sink;
  }

  it("delivers nothing: the send is refused turn_closed and its use stays spent", async () => {
    const audit = heldSink();
    const r = rig({ extra: { audit } });
    await r.grants.add(
      grant({
        id: "t",
        constraints: { maxUses: 1 },
        capabilities: [messageSendCapability("bob", "alice")],
      }),
    );
    const turn = await r.kernel.openTurnAuthority(ctx());
    const pending = turn.sendMessage({ recipient: "bob", payload: "hi", callId: "late" });
    await turn.close();
    audit.release();
    expect(await pending).toEqual({ status: "denied", code: "turn_closed" });
    expect(r.transport.delivered).toHaveLength(0);
    expect(await r.usage.getUsage(NS, "t")).toBe(1);
    expect(audit.events.map((e) => [e.callId, e.reason, e.grantId])).toEqual([
      ["late", "allowed", "t"],
      ["late", "turn_closed", "t"],
    ]);
  });

  it("allows nothing: authorize is refused turn_closed", async () => {
    const audit = heldSink();
    const r = rig({ extra: { audit } });
    await r.grants.add(grant({ id: "g", capabilities: [cap(["a"])] }));
    const turn = await r.kernel.openTurnAuthority(ctx());
    const pending = turn.authorize({ ...READ, callId: "late" });
    await turn.close();
    audit.release();
    expect(await pending).toEqual({ status: "denied", code: "turn_closed" });
    expect(audit.events.map((e) => [e.callId, e.reason])).toEqual([
      ["late", "allowed"],
      ["late", "turn_closed"],
    ]);
  });
});

describe("revocation during a turn", () => {
  it("applies from the next turn: the open lease keeps the grant set it read", async () => {
    const r = rig();
    await r.grants.add(grant({ id: "r", capabilities: [cap(["a"])] }));
    const before = await r.kernel.openTurnAuthority(ctx({ traceId: "before" }));
    await r.grants.revoke(NS, "r");
    expect((await before.authorize(READ)).status).toBe("allowed");
    const after = await r.kernel.openTurnAuthority(ctx({ traceId: "after" }));
    expect(await after.authorize(READ)).toEqual({ status: "denied", code: "tool_unavailable" });
    expect(r.audit.events.at(-1)).toMatchObject({ reason: "revoked", traceId: "after" });
  });
});

describe("requests", () => {
  it.each([
    ["no action", { resource: READ.resource }],
    ["empty action", { ...READ, action: "" }],
    ["path not an array", { ...READ, resource: { namespace: "files", path: "a" } }],
    ["empty path segment", { ...READ, resource: { namespace: "files", path: [""] } }],
    ["numeric callId", { ...READ, callId: 7 }],
    ["too long a segment", { ...READ, resource: { namespace: "files", path: ["x".repeat(513)] } }],
    ["null", null],
  ])("refuses a malformed authorize request (%s) with invalid_request", async (_name, request) => {
    const r = rig();
    await r.grants.add(grant({ capabilities: [cap(["a"])] }));
    const turn = await r.kernel.openTurnAuthority(ctx());
    expect(await turn.authorize(request as never)).toEqual({
      status: "denied",
      code: "invalid_request",
    });
    expect(r.audit.events).toHaveLength(1);
    expect(r.audit.events[0]?.reason).toBe("invalid_request");
  });

  it.each([
    ["empty recipient", { recipient: "", payload: 1 }],
    ["object recipient", { recipient: { id: "bob" }, payload: 1 }],
    ["bad callId", { recipient: "bob", payload: 1, callId: "" }],
  ])("refuses a malformed message (%s) and spends nothing", async (_name, request) => {
    const r = rig();
    await r.grants.add(
      grant({
        id: "t",
        constraints: { maxUses: 1 },
        capabilities: [messageSendCapability("bob", "alice")],
      }),
    );
    const turn = await r.kernel.openTurnAuthority(ctx());
    expect(await turn.sendMessage(request as never)).toEqual({
      status: "denied",
      code: "invalid_request",
    });
    expect(await r.usage.getUsage(NS, "t")).toBe(0);
    expect(r.transport.delivered).toHaveLength(0);
  });

  it("a payload holding grant-shaped fields grants nothing", async () => {
    const r = rig();
    await r.grants.add(grant({ capabilities: [messageSendCapability("bob", "alice")] }));
    const turn = await r.kernel.openTurnAuthority(ctx());
    const forged = grant({
      id: "forged",
      capabilities: [messageSendCapability("mallory", "alice")],
      constraints: {},
    });
    const payload = {
      grant: forged,
      grants: [forged],
      capabilities: forged.capabilities,
      authority: "host",
      recipient: "mallory",
    };
    expect(await turn.sendMessage({ recipient: "mallory", payload })).toEqual({
      status: "denied",
      code: "no_matching_grant",
    });
    expect(r.audit.events.at(-1)?.reason).toBe("no_capability");
    // The forged grant did not reach the source, nor a later turn.
    expect(await r.grants.listNamespace(NS)).toHaveLength(1);
    const next = await r.kernel.openTurnAuthority(ctx());
    expect((await next.sendMessage({ recipient: "mallory", payload: "again" })).status).toBe(
      "denied",
    );
    expect(r.transport.delivered).toHaveLength(0);
  });
});

describe("results and audit", () => {
  it("freezes what it returns", async () => {
    const r = rig();
    await r.grants.add(grant({ capabilities: [messageSendCapability("bob", "alice")] }));
    const turn = await r.kernel.openTurnAuthority(ctx());
    const sent = await turn.sendMessage({ recipient: "bob", payload: "hi" });
    const denied = await turn.sendMessage({ recipient: "eve", payload: "hi" });
    expect(Object.isFrozen(sent)).toBe(true);
    expect(Object.isFrozen(denied)).toBe(true);
    expect(Object.isFrozen(r.audit.events[0])).toBe(true);
    expect(Object.isFrozen(await turn.listTools())).toBe(true);
  });

  it("writes one schema-valid event per decision carrying trace, actor, authority, call and grant", async () => {
    const r = rig();
    await r.grants.add(
      grant({ id: "to-bob", capabilities: [messageSendCapability("bob", "alice")] }),
    );
    const turn = await r.kernel.openTurnAuthority(ctx({ traceId: "trace-x" }));
    await turn.sendMessage({ recipient: "bob", payload: "hi", callId: "c1" });
    await turn.sendMessage({ recipient: "eve", payload: "hi", callId: "c2" });
    expect(r.audit.events).toHaveLength(2);
    for (const event of r.audit.events)
      expect(AuditEventSchema.safeParse(event).success).toBe(true);
    expect(r.audit.events[0]).toMatchObject({
      traceId: "trace-x",
      actor: "asker",
      authority: "host",
      namespaceId: NS,
      callId: "c1",
      grantId: "to-bob",
      action: MESSAGE_SEND_ACTION,
      resource: "messages:/bob",
      code: null,
      reason: "allowed",
    });
    expect(r.audit.events[1]).toMatchObject({
      callId: "c2",
      code: "no_matching_grant",
      reason: "no_capability",
    });
    expect(r.audit.events[1]?.grantId).toBeUndefined();
  });

  it("a failed delivery is refused delivery_failed, spent, and recorded after the decision", async () => {
    const r = rig({ extra: { transport: new InProcessTransport() } }); // no route for anyone
    await r.grants.add(
      grant({
        id: "t",
        constraints: { maxUses: 1 },
        capabilities: [messageSendCapability("bob", "alice")],
      }),
    );
    const turn = await r.kernel.openTurnAuthority(ctx());
    expect(await turn.sendMessage({ recipient: "bob", payload: "hi", callId: "c" })).toEqual({
      status: "denied",
      code: "delivery_failed",
    });
    expect(await r.usage.getUsage(NS, "t")).toBe(1);
    expect(r.audit.events.map((e) => e.reason)).toEqual(["allowed", "delivery_failed"]);
  });

  it("a transport that throws is a failed delivery, not a crash", async () => {
    const transport = new InProcessTransport().route("bob", () => {
      throw new Error("socket closed");
    });
    const r = rig({ extra: { transport } });
    await r.grants.add(grant({ capabilities: [messageSendCapability("bob", "alice")] }));
    const turn = await r.kernel.openTurnAuthority(ctx());
    expect(await turn.sendMessage({ recipient: "bob", payload: "hi" })).toEqual({
      status: "denied",
      code: "delivery_failed",
    });
  });

  it("with no transport, refuses tool_unavailable before spending", async () => {
    const grants = new InMemoryGrantStore();
    const usage = new InMemoryGrantUsageStore();
    await grants.add(
      grant({
        id: "t",
        constraints: { maxUses: 1 },
        capabilities: [messageSendCapability("bob", "alice")],
      }),
    );
    const turn = await createKernel({ grants, usage }).openTurnAuthority(ctx());
    expect(await turn.sendMessage({ recipient: "bob", payload: "hi" })).toEqual({
      status: "denied",
      code: "tool_unavailable",
    });
    expect(await usage.getUsage(NS, "t")).toBe(0);
  });

  it("does not deliver when the audit sink refuses the event (audit_unavailable)", async () => {
    const transport = InProcessTransport.echo();
    const grants = new InMemoryGrantStore();
    await grants.add(grant({ capabilities: [messageSendCapability("bob", "alice")] }));
    const audit = {
      append: async () => {
        throw new Error("disk full");
      },
    };
    const turn = await createKernel({ grants, audit, transport }).openTurnAuthority(ctx());
    const error = await turn
      .sendMessage({ recipient: "bob", payload: "hi" })
      .catch((e: unknown) => e);
    expect(isTesseraError(error, "audit_unavailable")).toBe(true);
    expect(transport.delivered).toHaveLength(0);
  });
});
