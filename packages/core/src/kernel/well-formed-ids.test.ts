import { describe, expect, it } from "vitest";
import { cap, ctx, grant, rig } from "../../test/fixtures.js";
import { AccessContextSchema, GrantSchema, isPrintable, isTesseraError } from "../index.js";

/**
 * A lone surrogate is not text: every store writes IDs as UTF-8, which turns each one into
 * U+FFFD, so two IDs differing only there would meet in a SQLite index column or a Redis key
 * (and a trail holding one read as tampered). IDs are refused with one; pairs (emoji) pass.
 */
describe("IDs with a lone surrogate", () => {
  it("are not printable; a surrogate pair is", () => {
    expect(isPrintable("a\ud800")).toBe(false);
    expect(isPrintable("\udc00b")).toBe(false);
    expect(isPrintable("key 🔑")).toBe(true);
  });

  it("the grant and context schemas refuse them", () => {
    expect(GrantSchema.safeParse(grant({ id: "g\ud800", capabilities: [cap([])] })).success).toBe(
      false,
    );
    expect(
      GrantSchema.safeParse(grant({ subject: "\udfffagent", capabilities: [cap([])] })).success,
    ).toBe(false);
    expect(GrantSchema.safeParse(grant({ id: "g🔑", capabilities: [cap([])] })).success).toBe(true);
    expect(AccessContextSchema.safeParse(ctx({ traceId: "t\ud800" })).success).toBe(false);
  });

  it("a turn under such a namespace or trace is refused; nothing is written", async () => {
    const r = rig();
    await r.grants.add(grant({ capabilities: [cap([], { scope: "descendants" })] }));
    for (const bad of [ctx({ namespaceId: "n\ud800" }), ctx({ traceId: "t\udc00" })]) {
      const error = await r.kernel.openTurnAuthority(bad).catch((e: unknown) => e);
      expect(isTesseraError(error)).toBe(true);
    }
    expect(r.audit.events).toEqual([]);
  });

  it("a request with such a call ID or action is refused invalid_request, and recorded", async () => {
    const r = rig();
    await r.grants.add(grant({ capabilities: [cap([], { scope: "descendants" })] }));
    const turn = await r.kernel.openTurnAuthority(ctx());
    const resource = { namespace: "files", path: ["notes.md"] };
    for (const request of [
      { action: "files.read", resource, callId: "c\ud800" },
      { action: "files.read\udc00", resource, callId: "c-2" },
    ]) {
      expect(await turn.authorize(request)).toEqual({ status: "denied", code: "invalid_request" });
      expect(r.audit.events.at(-1)?.reason).toBe("invalid_request");
    }
    // Its event is written without the call ID it could not keep.
    expect(r.audit.events.map((event) => event.callId.isWellFormed())).not.toContain(false);
    expect((await turn.authorize({ action: "files.read", resource })).status).toBe("allowed");
  });
});
