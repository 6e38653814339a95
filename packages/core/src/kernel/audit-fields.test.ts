import { describe, expect, it } from "vitest";
import { cap, ctx, grant, OWNER, rig } from "../../test/fixtures.js";
import { AuditEventSchema } from "../index.js";

/** Every kernel event names the principal and the purpose the act was decided under. */

const READ = { action: "files.read", resource: { namespace: "files", path: ["a"] } };

describe("kernel audit events", () => {
  it("record the turn's owner and purpose on allowed and denied decisions", async () => {
    const r = rig();
    await r.grants.add(
      grant({ constraints: { purposes: ["review"] }, capabilities: [cap(["a"])] }),
    );
    const review = await r.kernel.openTurnAuthority(ctx({ purpose: "review" }));
    expect((await review.authorize(READ)).status).toBe("allowed");
    const marketing = await r.kernel.openTurnAuthority(ctx({ purpose: "marketing" }));
    expect((await marketing.authorize(READ)).status).toBe("denied");
    const principal = { namespaceId: "ns-test", actor: "asker", authority: "host", owner: OWNER };
    expect(r.audit.events).toMatchObject([
      { outcome: "allowed", purpose: "review", ...principal },
      { outcome: "denied", reason: "purpose_mismatch", purpose: "marketing", ...principal },
    ]);
    for (const event of r.audit.events) expect(AuditEventSchema.parse(event)).toEqual(event);
  });

  it("keep one key order whichever fields a decision has", async () => {
    const r = rig();
    await r.grants.add(grant({ capabilities: [cap(["a"])] }));
    await r.grants.add(
      grant({ constraints: { purposes: ["review"] }, capabilities: [cap(["b"])] }),
    );
    const plain = await r.kernel.openTurnAuthority(ctx());
    await plain.authorize(READ);
    const review = await r.kernel.openTurnAuthority(ctx({ purpose: "review" }));
    await review.authorize({ action: "files.read", resource: { namespace: "files", path: ["b"] } });
    const head = ["at", "source", "outcome", "code", "reason", "traceId", "callId"];
    const principal = ["namespaceId", "actor", "authority", "owner"];
    const [allowed, withPurpose] = await r.audit.read();
    expect(Object.keys(allowed ?? {}).slice(0, 14)).toEqual([
      ...head,
      ...principal,
      "grantId",
      "action",
      "resource",
    ]);
    expect(Object.keys(withPurpose ?? {}).slice(0, 15)).toEqual([
      ...head,
      ...principal,
      "purpose",
      "grantId",
      "action",
      "resource",
    ]);
  });

  it("leave owner and purpose out when the turn has none", async () => {
    const r = rig();
    await r.grants.add(grant({ capabilities: [cap(["a"])] }));
    const turn = await r.kernel.openTurnAuthority(ctx({ owner: undefined }));
    await turn.authorize(READ);
    await turn.authorize({ action: "files.read", resource: { namespace: "files", path: [".."] } });
    for (const event of r.audit.events) {
      expect(Object.keys(event)).not.toContain("owner");
      expect(Object.keys(event)).not.toContain("purpose");
    }
    expect(r.audit.events).toHaveLength(2);
  });
});
