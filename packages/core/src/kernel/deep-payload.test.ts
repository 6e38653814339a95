import { describe, expect, it } from "vitest";
import { ctx, grant, NS, rig } from "../../test/fixtures.js";
import { MAX_JSON_DEPTH } from "../contracts/canonical-json.js";
import { messageSendCapability } from "../index.js";

/** A payload nested past MAX_JSON_DEPTH is refused before anything hashes or serializes it. */

function nested(levels: number): unknown {
  let value: unknown = "leaf";
  for (let i = 0; i < levels; i++) value = { a: value };
  return value;
}

describe("a deeply nested message payload", () => {
  it.each([MAX_JSON_DEPTH + 1, 5_000, 100_000])(
    "%i levels: invalid_request, one audit event, nothing spent or delivered",
    async (levels) => {
      const r = rig();
      await r.grants.add(
        grant({
          id: "t",
          constraints: { maxUses: 1 },
          capabilities: [messageSendCapability("bob", "alice")],
        }),
      );
      const turn = await r.kernel.openTurnAuthority(ctx());
      const answer = await turn.sendMessage({
        recipient: "bob",
        payload: nested(levels),
        callId: "deep",
      });
      expect(answer).toEqual({ status: "denied", code: "invalid_request" });
      expect(r.audit.events.map((e) => [e.callId, e.reason])).toEqual([
        ["deep", "invalid_request"],
      ]);
      expect(await r.usage.getUsage(NS, "t")).toBe(0);
      expect(r.transport.delivered).toHaveLength(0);
    },
  );

  it(`${MAX_JSON_DEPTH} levels are delivered`, async () => {
    const r = rig();
    await r.grants.add(grant({ capabilities: [messageSendCapability("bob", "alice")] }));
    const turn = await r.kernel.openTurnAuthority(ctx());
    const answer = await turn.sendMessage({ recipient: "bob", payload: nested(MAX_JSON_DEPTH) });
    expect(answer.status).toBe("delivered");
  });
});

describe("a deeply nested reply", () => {
  it.each([MAX_JSON_DEPTH + 1, 5_000])(
    "%i levels: delivery_failed (invalid_reply) and the use stays spent, as for any reply it cannot use",
    async (levels) => {
      const r = rig();
      r.transport.route("deep", () => nested(levels));
      await r.grants.add(
        grant({
          id: "t",
          constraints: { maxUses: 1 },
          capabilities: [messageSendCapability("deep", "alice")],
        }),
      );
      const turn = await r.kernel.openTurnAuthority(ctx());
      const answer = await turn.sendMessage({ recipient: "deep", payload: 1, callId: "c" });
      // Handed on, it would overflow the stack of whatever wrote it next (a claim's answer, a
      // service's response) after the act was recorded, leaving the call in doubt for good.
      expect(answer).toEqual({ status: "denied", code: "delivery_failed" });
      expect(r.audit.events.at(-1)?.detail).toContain("invalid_reply");
      // The receiver answered: it may have acted, so the use is not given back.
      expect(await r.usage.getUsage(NS, "t")).toBe(1);
      expect(r.transport.delivered).toHaveLength(1);
    },
  );

  it(`${MAX_JSON_DEPTH} levels are handed back`, async () => {
    const r = rig();
    r.transport.route("deep", () => nested(MAX_JSON_DEPTH));
    await r.grants.add(grant({ capabilities: [messageSendCapability("deep", "alice")] }));
    const turn = await r.kernel.openTurnAuthority(ctx());
    const answer = await turn.sendMessage({ recipient: "deep", payload: 1 });
    expect(answer).toMatchObject({ status: "delivered", reply: nested(MAX_JSON_DEPTH) });
  });
});
