import { describe, expect, it } from "vitest";
import { ctx, grant, NS, OWNER, rig, T0 } from "../../test/fixtures.js";
import { explain, InProcessTransport, messageSendCapability } from "../index.js";

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
