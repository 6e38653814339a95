import { describe, expect, it } from "vitest";
import type { AuditEvent } from "../contracts/schemas.js";
import { misindexedAuditEvent, parseStoredAuditEvent, UnreadableAuditEvent } from "./unreadable.js";
import { verifyAuditChain } from "./verify.js";
import { unreadableTrail } from "./walk.js";

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

  it("an event its store filed under another call ID is a misindexed break at its seq", () => {
    const event = { callId: "call-2", namespaceId: "ns", seq: 3 } as unknown as AuditEvent;
    const thrown = misindexedAuditEvent(event, 4, "call ID");
    expect(thrown).toBeInstanceOf(UnreadableAuditEvent);
    expect(thrown).toMatchObject({
      code: "audit_unavailable",
      position: 4,
      misindexed: { stream: "ns", seq: 3, index: "call ID" },
    });
    // Names positions only, never the IDs themselves.
    expect(thrown.message).not.toContain("call-2");
    const verdict = unreadableTrail(thrown.position, thrown.misindexed);
    expect(verdict.break).toMatchObject({ kind: "misindexed", stream: "ns", index: 4, seq: 3 });
    expect(verdict.break.detail).toContain("call ID index disagrees with the event at seq 3");
  });
});
