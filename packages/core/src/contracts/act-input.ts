import type { Act } from "../ports/act-ledger.js";
import { TesseraError } from "./errors.js";
import type { AuditEvent } from "./schemas.js";
import {
  checkClaimKey,
  checkId,
  checkMaxUses,
  checkRecord,
  parseAuditEvent,
} from "./store-input.js";

/**
 * An act as every ledger checks it before writing anything: the claim's key and record, the
 * spend's IDs and bound, the events against the event schema, and the one rule that binds
 * them — a spend needs its `exhausted` event, which is a denial. Returns the events as parsed
 * (unknown members refused), so a store writes what was checked.
 */
export function checkAct(act: Act): { event: AuditEvent; exhausted?: AuditEvent } {
  if (typeof act !== "object" || act === null) {
    throw new TesseraError("invalid_input", "an act is { claim?, spend?, event, exhausted? }");
  }
  if (act.claim !== undefined) {
    checkClaimKey(act.claim.key);
    checkRecord(act.claim.record);
  }
  const event = parseAuditEvent(act.event);
  if (act.spend === undefined) {
    if (act.exhausted !== undefined) {
      throw new TesseraError("invalid_input", "an act's exhausted event needs a spend");
    }
    return { event };
  }
  checkId(act.spend.namespaceId, "namespaceId");
  checkId(act.spend.grantId, "grantId");
  checkMaxUses(act.spend.maxUses);
  if (act.exhausted === undefined) {
    throw new TesseraError("invalid_input", "an act with a spend needs its exhausted event");
  }
  const exhausted = parseAuditEvent(act.exhausted);
  if (exhausted.outcome !== "denied" || exhausted.code === null) {
    throw new TesseraError("invalid_input", "an act's exhausted event is a denial with a code");
  }
  return { event, exhausted };
}

/**
 * The answer a claim keeps when its act was recorded as a denial (nothing will run, so the
 * claim is settled `denied` in the same write), or `undefined` when the act stands.
 */
export function deniedAnswerOf(
  recorded: AuditEvent,
): { status: "denied"; code: string } | undefined {
  if (recorded.outcome !== "denied" || recorded.code === null) return undefined;
  return { status: "denied", code: recorded.code };
}
