import type { ClaimKey, ClaimReceipt, ClaimRecord, StoredClaim } from "@tessera/core";

/**
 * Marker file layout (one per claim, named by `claimKeyDigest`): one JSON object,
 * `{ "v": 1, session, functionCallId, bodyHash, claimedAt, worker?, receipt? }`.
 * The file's existence is the claim; its content is informational. `receipt` appears once
 * the outcome is settled (the marker is then replaced atomically by rename); a marker
 * without it is a claim in doubt.
 */
export const MARKER_NAME = /^[0-9a-f]{64}$/;

export function encodeMarker(key: ClaimKey, record: ClaimRecord, receipt?: ClaimReceipt): string {
  return JSON.stringify({
    v: 1,
    session: key.session,
    functionCallId: key.functionCallId,
    bodyHash: record.bodyHash,
    claimedAt: record.claimedAt,
    ...(record.worker === undefined ? {} : { worker: record.worker }),
    ...(receipt === undefined
      ? {}
      : { receipt: { status: receipt.status, settledAt: receipt.settledAt } }),
  });
}

/** The stored claim, or undefined when the content is not (yet, or no longer) a whole marker. */
export function decodeMarker(text: string): StoredClaim | undefined {
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  const { session, functionCallId, bodyHash, claimedAt, worker, receipt } = parsed;
  if (
    parsed.v !== 1 ||
    typeof session !== "string" ||
    typeof functionCallId !== "string" ||
    typeof bodyHash !== "string" ||
    typeof claimedAt !== "number"
  ) {
    return undefined;
  }
  const settled = receipt as { status?: unknown; settledAt?: unknown } | undefined;
  return Object.freeze({
    session,
    functionCallId,
    bodyHash,
    claimedAt,
    ...(typeof worker === "string" ? { worker } : {}),
    ...(settled && typeof settled.status === "string" && typeof settled.settledAt === "number"
      ? {
          receipt: Object.freeze({
            status: settled.status as ClaimReceipt["status"],
            settledAt: settled.settledAt,
          }),
        }
      : {}),
  });
}
