import type { Act, AuditEvent, StoreBundle } from "@tessera/core";

/** The acts the act-ledger suites record: one namespace, session `s`, one body hash. */

/**
 * The ports an act ledger is checked through: it writes, the others read back. The grant
 * store, when the factory hands the whole bundle, moves the versions an act is checked on.
 */
export type ActLedgerPorts = Pick<StoreBundle, "acts" | "claims" | "usage" | "audit"> &
  Partial<Pick<StoreBundle, "grants">>;

/** The namespace every act of the suites spends and records in. */
export const NS = "ns-acts";

/** The decision's event of an act on `callId` (allowed unless `denied`). */
export function actEvent(callId: string, denied?: "no_matching_grant"): AuditEvent {
  return {
    at: "2026-06-01T00:00:00.000Z",
    source: "kernel",
    outcome: denied === undefined ? "allowed" : "denied",
    code: denied ?? null,
    reason: denied === undefined ? "allowed" : "no_capability",
    traceId: `trace-${callId}`,
    callId,
    namespaceId: NS,
    actor: "agent",
    grantId: "ticket",
    action: "messages.send",
  };
}

/** The event an act records instead when its spend loses. */
export function exhaustedEvent(callId: string): AuditEvent {
  return {
    ...actEvent(callId),
    outcome: "denied",
    code: "tool_unavailable",
    reason: "grant_exhausted",
  };
}

/** A retry-safe act on `callId`: claim (session `s`), spend one use of `grantId`, event. */
export function spendingAct(callId: string, grantId = "ticket", maxUses = 1): Act {
  return {
    claim: {
      key: { session: "s", functionCallId: callId },
      record: { bodyHash: "b".repeat(64), claimedAt: 1_780_000_000_000 },
    },
    spend: { namespaceId: NS, grantId, maxUses },
    event: actEvent(callId),
    exhausted: exhaustedEvent(callId),
  };
}
