/**
 * What a raw primitive writes beside a store's claim: a key part and a record as long as the
 * store's (SHA-256 hex digests, the record JSON with session and ID), so a ratio measures
 * the store's work rather than a shorter payload. Built with string templates: none of the
 * store's digest or JSON work lands on the raw side.
 */
export const RAW_SESSION_DIGEST = "5".repeat(64);

/** 64 hex-ish characters, unique per (tag, i): the length of a SHA-256 hex digest. */
export function rawDigest(tag: string, i: number): string {
  return `${tag}${i.toString(16).padStart(64 - tag.length, "0")}`;
}

/** The JSON record a store writes for call `${tag}-${i}` in session "bench". */
export function rawRecordJson(
  tag: string,
  i: number,
  record: { readonly bodyHash: string; readonly claimedAt: number; readonly worker?: string },
): string {
  const worker = record.worker === undefined ? "" : `,"worker":"${record.worker}"`;
  return `{"session":"bench","functionCallId":"${tag}-${i}","bodyHash":"${record.bodyHash}","claimedAt":${record.claimedAt}${worker}}`;
}
