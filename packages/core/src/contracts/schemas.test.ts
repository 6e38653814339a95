import { describe, expect, it } from "vitest";
import { cap, grant, rig, T0 } from "../../test/fixtures.js";
import { isTesseraError } from "./errors.js";
import { AuditEventSchema, GrantSchema } from "./schemas.js";

const at = (ms: number) => new Date(T0 + ms).toISOString();
const withWindow = (notBefore: number, expiresAt: number) =>
  grant({
    constraints: { notBefore: at(notBefore), expiresAt: at(expiresAt) },
    capabilities: [cap(["a"])],
  });

describe("GrantSchema: the time window", () => {
  it("refuses a grant whose notBefore is after its expiresAt", async () => {
    expect(GrantSchema.safeParse(withWindow(1001, 1000)).success).toBe(false);
    const error = await rig()
      .grants.add(withWindow(1001, 1000))
      .catch((e: unknown) => e);
    expect(isTesseraError(error, "invalid_grant")).toBe(true);
  });

  it("accepts a window that opens before it closes, and one-sided windows", () => {
    expect(GrantSchema.safeParse(withWindow(0, 1000)).success).toBe(true);
    const open = (constraints: object) => grant({ constraints, capabilities: [cap(["a"])] });
    expect(GrantSchema.safeParse(open({ notBefore: at(5000) })).success).toBe(true);
    expect(GrantSchema.safeParse(open({ expiresAt: at(-5000) })).success).toBe(true);
  });
});

describe("AuditEventSchema: the principal and purpose of a decision", () => {
  const event = {
    at: at(0),
    source: "kernel",
    outcome: "allowed",
    code: null,
    reason: "allowed",
    traceId: "t",
    callId: "c",
  };

  it("takes an optional owner and purpose", () => {
    expect(
      AuditEventSchema.safeParse({ ...event, owner: "alice", purpose: "review" }).success,
    ).toBe(true);
    expect(AuditEventSchema.safeParse(event).success).toBe(true);
  });

  it("knows the owner_mismatch reason", () => {
    const denied = { ...event, outcome: "denied", code: "no_matching_grant" };
    expect(AuditEventSchema.safeParse({ ...denied, reason: "owner_mismatch" }).success).toBe(true);
  });
});
