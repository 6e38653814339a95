import { TesseraError } from "@tessera/core";
import { type ChainHead, EMPTY_HEAD } from "@tessera/core/store-kit";

/**
 * A stream's chain head as the audit and act scripts keep it in `audit-heads` (`seq:hash`);
 * the empty stream's is the empty string (no field).
 */
export function encodeHead(head: ChainHead): string {
  return head.seq === 0 ? "" : `${head.seq}:${head.hash}`;
}

/** The head a script answered; an unreadable one fails closed with `code`. */
export function decodeHead(
  text: string,
  code: "audit_unavailable" | "store_unavailable",
): ChainHead {
  if (text === "") return EMPTY_HEAD;
  const [seq, hash] = text.split(":");
  const head = { seq: Number(seq), hash: hash ?? "" };
  if (!Number.isSafeInteger(head.seq) || head.seq < 1 || !/^[0-9a-f]{64}$/.test(head.hash)) {
    throw new TesseraError(code, "the audit stream's head is unreadable");
  }
  return head;
}
