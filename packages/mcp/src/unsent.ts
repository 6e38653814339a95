import { type AuditEvent, releaseUse } from "@tessera/core";
import { audit } from "./call-audit.js";
import type { PipelineParts, Trail } from "./pipeline.js";

/**
 * A call the upstream provably never received (no connection, an unknown session: see
 * forward.ts) spent its ticket for nothing: give the use back and record that as its own
 * event (`use_returned`), after the call's own. Only a use that was spent comes back (the
 * store never goes below zero, and an unbounded grant has none), and a store that cannot give
 * it back leaves it spent: that fails closed. A call that may have reached the upstream never
 * comes here.
 */
export async function returnUnsentUse(
  parts: PipelineParts,
  trail: Trail,
  decided: AuditEvent | undefined,
  failedEvent: AuditEvent,
  latency: number,
): Promise<void> {
  const grantId = decided?.grantId;
  if (parts.usage === undefined || grantId === undefined) return;
  const namespaceId = decided?.namespaceId ?? trail.caller.principal.namespaceId;
  let released = false;
  try {
    released = (await releaseUse(parts.usage, namespaceId, grantId))?.released === true;
  } catch {
    return;
  }
  if (!released) return;
  await audit(
    parts,
    trail,
    { ...failedEvent, reason: "use_returned" },
    ["the upstream was never reached: one use was given back"],
    "failed",
    latency,
  );
}
