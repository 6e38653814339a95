import type { AuditEvent, StoreBundle } from "@tessera/core";
import { expectCode } from "./errors.js";

/** @deprecated Use `StoreBundle` from `@tessera/core`; kept for one release. */
export type StoresBundle = Omit<StoreBundle, "close">;

const key = { session: "s", functionCallId: "c" };
const record = { bodyHash: "h", claimedAt: 1 };
const event: AuditEvent = {
  at: "2026-01-01T00:00:00.000Z",
  source: "kernel",
  outcome: "allowed",
  code: null,
  reason: "allowed",
  traceId: "t",
  callId: "c",
};

/**
 * Asserts that every operation of every port of a closed bundle refuses with that port's
 * own `*_unavailable` code: a closed store never answers from a stale handle.
 */
export async function expectClosedStoresRefuse(stores: Omit<StoreBundle, "close">): Promise<void> {
  const refusals: [() => Promise<unknown>, string][] = [
    [() => stores.usage.tryConsume("ns", "g", 1), "usage_store_unavailable"],
    [() => stores.usage.getUsage("ns", "g"), "usage_store_unavailable"],
    [() => stores.claims.claim(key, record), "claim_store_unavailable"],
    [() => stores.claims.get(key), "claim_store_unavailable"],
    [
      () => stores.claims.settle(key, { status: "failed", settledAt: 1 }),
      "claim_store_unavailable",
    ],
    [() => stores.claims.listInDoubt(), "claim_store_unavailable"],
    [() => stores.claims.endSession("s"), "claim_store_unavailable"],
    [() => stores.grants.listGrants("ns", "a"), "grant_store_unavailable"],
    [() => stores.grants.listNamespace("ns"), "grant_store_unavailable"],
    [() => stores.grants.revoke("ns", "g"), "grant_store_unavailable"],
    [async () => stores.audit.append(event), "audit_unavailable"],
    [() => stores.audit.read(), "audit_unavailable"],
  ];
  for (const [action, code] of refusals) await expectCode(action, [code]);
}
