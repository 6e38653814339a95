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
