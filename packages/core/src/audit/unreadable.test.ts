import { describe, expect, it } from "vitest";
import type { AuditEvent } from "../contracts/schemas.js";
import { parseStoredAuditEvent, UnreadableAuditEvent } from "./unreadable.js";
import { verifyAuditChain } from "./verify.js";

describe("an unreadable stored audit event", () => {
  it.each([
    ["not JSON", "{not json"],
    ["JSON null", "null"],
    ["a JSON number", "42"],
    ["a JSON array", "[]"],
    ["a driver's null", null],
  ])("%s is UnreadableAuditEvent (audit_unavailable) at its position", (_t, stored) => {
    let thrown: unknown;
    try {
      parseStoredAuditEvent(stored, 7);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(UnreadableAuditEvent);
    expect(thrown).toMatchObject({ code: "audit_unavailable", position: 7 });
  });

  it("an object reads back as it was stored", () => {
    expect(parseStoredAuditEvent('{"callId":"c"}', 0)).toEqual({ callId: "c" });
  });

  it("verifyAuditChain reports a null in its list as unreadable, not a TypeError", () => {
    const events = [{ callId: "a" }, null] as unknown as AuditEvent[];
    const verdict = verifyAuditChain(events);
    expect(verdict.ok).toBe(false);
    if (verdict.ok) return;
    expect(verdict.break).toMatchObject({ kind: "unreadable", index: 1 });
  });
});
