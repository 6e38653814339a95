import type { Act, GrantVersionCheck, Withdrawal } from "../ports/act-ledger.js";
import { TesseraError } from "./errors.js";
import type { AuditEvent } from "./schemas.js";
import {
  checkClaimKey,
  checkId,
  checkMaxUses,
  checkRecord,
  parseAuditEvent,
  serializeAnswer,
} from "./store-input.js";

/**
 * An act as every ledger checks it before writing anything: the claim's key and record, the
 * spend's IDs and bound, the events against the event schema, and the one rule that binds
 * them — a spend needs its `exhausted` event, which is a denial. Returns the events as parsed
 * (unknown members refused), so a store writes what was checked.
 */
export function checkAct(
  act: Act,
  options: {
    readonly checksVersions?: boolean;
    /** The ledger `undoesLostSpends`: a spend may come without its `exhausted` event. */
    readonly undoesLostSpends?: boolean;
  } = {},
): { event: AuditEvent; exhausted?: AuditEvent } {
  if (typeof act !== "object" || act === null) {
    throw new TesseraError("invalid_input", "an act is { claim?, spend?, event, exhausted? }");
  }
  // A ledger that cannot check versions must not record an act that asks for it: the act
  // would stand on grants nobody checked.
  if (act.versions !== undefined && options.checksVersions !== true) {
    throw new TesseraError("invalid_input", "this act ledger does not check grant versions");
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
    if (options.undoesLostSpends === true) return { event };
    throw new TesseraError("invalid_input", "an act with a spend needs its exhausted event");
  }
  const exhausted = parseAuditEvent(act.exhausted);
  if (exhausted.outcome !== "denied" || exhausted.code === null) {
    throw new TesseraError("invalid_input", "an act's exhausted event is a denial with a code");
  }
  return { event, exhausted };
}

/**
 * A withdrawal as every ledger checks it before writing anything: the act (which must carry a
 * claim), the withdrawal's event and the answer its claim will keep. Returns the act with its
 * claim, the event as parsed and the answer as JSON text, so a store writes what was checked.
 */
export function checkWithdrawal(withdrawal: Withdrawal): {
  act: Withdrawal["act"];
  event: AuditEvent;
  answer: string;
} {
  if (typeof withdrawal !== "object" || withdrawal === null) {
    throw new TesseraError("invalid_input", "a withdrawal is { act, event, answer }");
  }
  const { act } = withdrawal;
  // The act as it was recorded: the versions it was checked against, and the event it would
  // have recorded had its spend lost, play no part now.
  checkAct(act, { checksVersions: true, undoesLostSpends: true });
  if (act.claim === undefined) {
    throw new TesseraError("invalid_input", "only an act with a claim can be withdrawn");
  }
  const event = parseAuditEvent(withdrawal.event);
  const answer = serializeAnswer(withdrawal.answer);
  if (answer === undefined) {
    throw new TesseraError("invalid_input", "a withdrawal needs the answer its claim keeps");
  }
  return { act, event, answer };
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

/** The longest grant version a store hands out is far shorter; anything longer is refused. */
const MAX_VERSION_LENGTH = 512;

/**
 * An act's grant versions as a ledger that checks them reads them: each holder's IDs checked
 * like any other, each version a non-empty string. Empty when the act carries none.
 */
export function checkVersions(act: Act): readonly GrantVersionCheck[] {
  const versions = act.versions;
  if (versions === undefined) return [];
  if (!Array.isArray(versions)) {
    throw new TesseraError(
      "invalid_input",
      "an act's versions are [{ namespaceId, subject, version }]",
    );
  }
  for (const check of versions as readonly GrantVersionCheck[]) {
    if (typeof check !== "object" || check === null) {
      throw new TesseraError(
        "invalid_input",
        "a version check is { namespaceId, subject, version }",
      );
    }
    checkId(check.namespaceId, "namespaceId");
    checkId(check.subject, "subject");
    if (
      typeof check.version !== "string" ||
      check.version.length === 0 ||
      check.version.length > MAX_VERSION_LENGTH
    ) {
      throw new TesseraError("invalid_input", "a grant version is a non-empty string");
    }
  }
  return versions;
}
