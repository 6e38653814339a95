import { describe, expect, it } from "vitest";
import { ctx, grant, NS, OWNER, rig, T0 } from "../../test/fixtures.js";
import {
  type AuditEvent,
  type AuditReason,
  type ExplainPrincipal,
  explain,
  InMemoryAuditSink,
  InProcessTransport,
  messageSendCapability,
} from "../index.js";

/** explain() tells apart, from audit, what the caller-facing code hides. */
describe("explain", () => {
  it("tells spent, never granted, revoked, expired, purpose, issuer and allowed apart", async () => {
    const r = rig();
    const send = (to: string) => [messageSendCapability(to, OWNER)];
    await r.grants.add(
      grant({ id: "spent", constraints: { maxUses: 1 }, capabilities: send("a") }),
    );
    await r.grants.add(grant({ id: "revoked", capabilities: send("b") }));
    await r.grants.add(
      grant({
        id: "expired",
        constraints: { expiresAt: new Date(T0).toISOString() },
        capabilities: send("c"),
      }),
    );
    await r.grants.add(
      grant({ id: "purpose", constraints: { purposes: ["hr"] }, capabilities: send("d") }),
    );
    await r.grants.add(grant({ id: "foreign", issuer: "other-host", capabilities: send("e") }));
    await r.grants.add(grant({ id: "open", capabilities: send("f") }));
    await r.grants.revoke(NS, "revoked");
    const turn = await r.kernel.openTurnAuthority(ctx());
    const calls: Record<string, string> = {
      first: "a",
      replay: "a",
      nobody: "zed",
      revoked: "b",
      expired: "c",
      purpose: "d",
      foreign: "e",
      open: "f",
    };
    for (const [callId, recipient] of Object.entries(calls)) {
      await turn.sendMessage({ recipient, payload: "q", callId });
    }
    const verdicts = Object.fromEntries(
      await Promise.all(
        Object.keys(calls).map(async (id) => [id, (await explain(r.audit, id)).verdict]),
      ),
    );
    expect(verdicts).toEqual({
      first: "allowed",
      replay: "spent",
      nobody: "never_granted",
      revoked: "revoked",
      expired: "expired",
      purpose: "purpose_mismatch",
      foreign: "issuer_mismatch",
      open: "allowed",
    });
    // The caller heard the same code for "spent" and "never granted".
    const replay = await explain(r.audit, "replay");
    const nobody = await explain(r.audit, "nobody");
    expect(replay.code).toBe(nobody.code);
    expect(replay.grantId).toBe("spent");
    expect(nobody.grantId).toBeUndefined();
  });

  it("names the grant in its summary: a minted UUID as it is, a hostile ID by its length", async () => {
    const r = rig();
    const minted = "3d451be3-557e-4db8-af19-491a2278e329";
    await r.grants.add(
      grant({
        id: minted,
        constraints: { maxUses: 1 },
        capabilities: [messageSendCapability("a", OWNER)],
      }),
    );
    await r.grants.add(
      grant({ id: "x".repeat(70), capabilities: [messageSendCapability("b", OWNER)] }),
    );
    const turn = await r.kernel.openTurnAuthority(ctx());
    for (const [callId, recipient] of [
      ["one", "a"],
      ["two", "a"],
      ["long", "b"],
    ]) {
      await turn.sendMessage({
        recipient: recipient as string,
        payload: "q",
        callId: callId as string,
      });
    }
    expect((await explain(r.audit, "two")).summary).toBe(
      `refused: the matching grant exists but its uses are spent (grant ${minted})`,
    );
    expect((await explain(r.audit, "long")).summary).toMatch(/\(grant <70 chars>\)$/);
  });

  it("reports a failed delivery after its allowed decision, and unknown for unseen calls", async () => {
    const r = rig({ extra: { transport: new InProcessTransport() } });
    await r.grants.add(grant({ capabilities: [messageSendCapability("bob", OWNER)] }));
    const turn = await r.kernel.openTurnAuthority(ctx());
    await turn.sendMessage({ recipient: "bob", payload: "q", callId: "lost" });
    const lost = await explain(r.audit, "lost");
    expect(lost.verdict).toBe("delivery_failed");
    expect(lost.events).toHaveLength(2);
    expect((await explain(r.audit, "never-made")).verdict).toBe("unknown");
  });
});

/** explain() keys decisions by (principal, call ID): another principal's use never flips it. */
describe("explain per principal", () => {
  const alice: ExplainPrincipal = {
    namespaceId: NS,
    actor: "asker",
    authority: "host",
    owner: OWNER,
  };

  /** Alice's ticket is spent by "first", refused as spent under "t2"; then others reuse "t2". */
  async function spentThenReused() {
    const r = rig();
    await r.grants.add(
      grant({
        id: "ticket",
        constraints: { maxUses: 1 },
        capabilities: [messageSendCapability("bob", OWNER)],
      }),
    );
    const turn = await r.kernel.openTurnAuthority(ctx());
    await turn.sendMessage({ recipient: "bob", payload: "q", callId: "first" });
    await turn.sendMessage({ recipient: "bob", payload: "q", callId: "t2" });
    const mallory = await r.kernel.openTurnAuthority(ctx({ actor: "mallory" }));
    await mallory.sendMessage({ recipient: "bob", payload: "q", callId: "t2" });
    const bobs = await r.kernel.openTurnAuthority(ctx({ owner: "bob-owner" }));
    await bobs.sendMessage({ recipient: "bob", payload: "q", callId: "t2" });
    return r;
  }

  it("without a principal, the principal that first used the ID decides", async () => {
    const r = await spentThenReused();
    expect(r.audit.events.filter((e) => e.callId === "t2")).toHaveLength(3);
    const explained = await explain(r.audit, "t2");
    expect(explained).toMatchObject({
      verdict: "spent",
      grantId: "ticket",
      code: "tool_unavailable",
    });
    expect(explained.events).toHaveLength(1);
    expect(explained.events[0]).toMatchObject({ actor: "asker", owner: OWNER });
  });

  it("with a principal, only that principal's events count", async () => {
    const r = await spentThenReused();
    expect((await explain(r.audit, "t2", alice)).verdict).toBe("spent");
    const mallory = await explain(r.audit, "t2", { ...alice, actor: "mallory" });
    expect(mallory.verdict).toBe("never_granted");
    expect(mallory.events.every((e) => e.actor === "mallory")).toBe(true);
    const bob = await explain(r.audit, "t2", { ...alice, owner: "bob-owner" });
    expect(bob).toMatchObject({ verdict: "owner_mismatch", code: "tool_unavailable" });
    expect(bob.grantId).toBeUndefined();
  });

  it("a principal that never used the ID gets exactly the answer for an unused ID", async () => {
    const r = await spentThenReused();
    const strangers: ExplainPrincipal[] = [
      { ...alice, actor: "eve" },
      { ...alice, namespaceId: "ns-other" },
      { ...alice, authority: "other-host" },
      { namespaceId: NS, actor: "asker", authority: "host" }, // no owner: not alice's turn
    ];
    for (const principal of strangers) {
      const answer = await explain(r.audit, "t2", principal);
      const unused = await explain(r.audit, "never-used", principal);
      expect({ ...answer, callId: "never-used" }).toEqual(unused);
      expect(answer.verdict).toBe("unknown");
    }
  });

  it("the first principal's later events still decide (a failed delivery after the allowed one)", async () => {
    const audit = new InMemoryAuditSink();
    const base = {
      source: "kernel",
      traceId: "t",
      callId: "c",
      namespaceId: NS,
      authority: "host",
    } as const;
    const event = (actor: string, reason: AuditReason, at: string): AuditEvent => ({
      ...base,
      at,
      actor,
      reason,
      outcome: reason === "allowed" ? "allowed" : "denied",
      code: reason === "allowed" ? null : "delivery_failed",
    });
    audit.append(event("asker", "allowed", "2026-01-01T00:00:00.000Z"));
    audit.append(event("mallory", "invalid_request", "2026-01-01T00:00:01.000Z"));
    audit.append(event("asker", "delivery_failed", "2026-01-01T00:00:02.000Z"));
    expect((await explain(audit, "c")).verdict).toBe("delivery_failed");
  });
});

describe("explain over a sink whose filter lets other IDs through", () => {
  it("tells only the asked ID's events", async () => {
    const inner = new InMemoryAuditSink();
    const event = (callId: string, reason: AuditReason, outcome: "allowed" | "denied") => ({
      at: new Date(T0).toISOString(),
      source: "kernel" as const,
      outcome,
      code: outcome === "allowed" ? null : ("no_matching_grant" as const),
      reason,
      traceId: "t",
      callId,
    });
    inner.append(event("job_1", "allowed", "allowed"));
    inner.append(event("jobX1", "grant_exhausted", "denied"));
    // As an unescaped SQL LIKE would read `job_1`.
    const loose = {
      read: async () => inner.read(),
    };
    const told = await explain(loose, "job_1");
    expect(told.verdict).toBe("allowed");
    expect(told.events.map((e) => e.callId)).toEqual(["job_1"]);
  });
});

describe("explain of an A2UI call the kernel decided", () => {
  const principal = { namespaceId: NS, actor: "asker", authority: "host", owner: OWNER };
  const event = (fields: Partial<AuditEvent>): AuditEvent => ({
    at: new Date(T0).toISOString(),
    outcome: "denied",
    traceId: "fc-1",
    callId: "fc-1",
    source: "kernel",
    code: "tool_unavailable",
    reason: "grant_exhausted",
    ...fields,
  });

  it("answers with the kernel's reason and the gate's code, with or without a principal", async () => {
    const audit = new InMemoryAuditSink();
    // As the service writes them: the kernel's refusal, then the gate's, both with the principal.
    await audit.append(event({ ...principal, action: "a2ui.call" }));
    await audit.append(
      event({
        ...principal,
        source: "gate",
        code: "EXECUTION_FAILED",
        reason: "policy_denied",
        session: "s-1",
        receipt: "denied",
      }),
    );
    for (const told of [await explain(audit, "fc-1"), await explain(audit, "fc-1", principal)]) {
      expect(told).toMatchObject({
        verdict: "spent",
        reason: "grant_exhausted",
        code: "EXECUTION_FAILED",
      });
      expect(told.events).toHaveLength(2);
    }
  });

  it("a duplicate of a call left in doubt keeps telling the first call's story", async () => {
    const audit = new InMemoryAuditSink();
    const allowed = { ...principal, outcome: "allowed", code: null, grantId: "g-a2ui" } as const;
    await audit.append(event({ ...allowed, action: "a2ui.call", reason: "allowed" }));
    await audit.append(
      event({ ...allowed, source: "gate", reason: "dispatched", session: "s-1", receipt: "none" }),
    );
    // Its instance died before the receipt; the retry on another is refused as a duplicate.
    const duplicate = event({
      ...principal,
      source: "gate",
      code: "INVALID_FUNCTION_CALL",
      reason: "duplicate_call",
      session: "s-1",
      receipt: "none",
    });
    await audit.append(duplicate);
    await audit.append(duplicate);
    for (const told of [await explain(audit, "fc-1"), await explain(audit, "fc-1", principal)]) {
      expect(told).toMatchObject({ verdict: "allowed", reason: "dispatched", code: null });
      expect(told.grantId).toBe("g-a2ui");
      expect(told.events).toHaveLength(4);
    }
    // Only duplicates (the first call's events not among them): they are what is told.
    const alone = new InMemoryAuditSink();
    await alone.append(duplicate);
    expect(await explain(alone, "fc-1")).toMatchObject({
      verdict: "refused",
      reason: "duplicate_call",
    });
  });

  it("keeps a gate's own policy refusal as refused when no kernel refusal precedes it", async () => {
    const audit = new InMemoryAuditSink();
    await audit.append(
      event({ source: "gate", code: "EXECUTION_FAILED", reason: "policy_denied", session: "s" }),
    );
    expect((await explain(audit, "fc-1")).verdict).toBe("refused");
  });
});
