import type { ClaimKey, ClaimReceipt, ClaimRecord } from "./claims.js";
import { TesseraError } from "./errors.js";

/**
 * Shape checks at the store boundary. TypeScript callers are already typed; these guard
 * JavaScript callers and deserialised input, so a malformed call is refused with
 * `invalid_input` before any statement runs.
 */
const SETTLED_STATUSES: ReadonlySet<string> = new Set(["dispatched", "denied", "failed"]);

export function checkClaimKey(key: ClaimKey): void {
  if (
    typeof key !== "object" ||
    key === null ||
    typeof key.session !== "string" ||
    typeof key.functionCallId !== "string"
  ) {
    throw new TesseraError(
      "invalid_input",
      "a claim key is { session: string, functionCallId: string }",
    );
  }
}

export function checkRecord(record: ClaimRecord): void {
  if (
    typeof record !== "object" ||
    record === null ||
    typeof record.bodyHash !== "string" ||
    !Number.isSafeInteger(record.claimedAt) ||
    (record.worker !== undefined && typeof record.worker !== "string")
  ) {
    throw new TesseraError(
      "invalid_input",
      "a claim record is { bodyHash: string, claimedAt: integer ms, worker?: string }",
    );
  }
}

export function checkReceipt(receipt: ClaimReceipt): void {
  if (
    typeof receipt !== "object" ||
    receipt === null ||
    !SETTLED_STATUSES.has(receipt.status) ||
    !Number.isSafeInteger(receipt.settledAt)
  ) {
    throw new TesseraError(
      "invalid_input",
      "a receipt is { status: dispatched | denied | failed, settledAt: integer ms }",
    );
  }
}
