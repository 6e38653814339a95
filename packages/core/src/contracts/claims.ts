import { uniqueStorageDigest } from "./digest.js";
import type { ReceiptStatus } from "./vocabulary.js";

/**
 * The claim-store port of the A2UI gate. It lives in the contracts so that every backend
 * implements it without depending on the gate. Stores implement only atomic primitives;
 * claim policy (what a duplicate means, when a claim is in doubt) stays in the gate.
 */

/** (trusted host session, functionCallId): the session comes from host authentication. */
export interface ClaimKey {
  readonly session: string;
  readonly functionCallId: string;
}

/** What the gate writes when it claims. Informational: the claim is the key's existence. */
export interface ClaimRecord {
  /** SHA-256 of the canonical call body, to tell a changed body from a plain retry. */
  readonly bodyHash: string;
  /** Epoch milliseconds. */
  readonly claimedAt: number;
  /** Who claimed (pid, host), for operators. */
  readonly worker?: string;
}

export interface ClaimReceipt {
  readonly status: Exclude<ReceiptStatus, "none" | "in_doubt">;
  /** Epoch milliseconds. */
  readonly settledAt: number;
}

/** A JSON-safe value: what a claim keeps as its answer. */
export type JsonValue =
  | null
  | boolean
  | number
  | string
  | readonly JsonValue[]
  | { readonly [key: string]: JsonValue };

/** A claim as stored. Without a settled receipt the claim is in doubt. */
export interface StoredClaim extends ClaimKey, ClaimRecord {
  readonly receipt?: ClaimReceipt;
  /**
   * What the act answered (a reply, a message ID, a tool result), kept with its receipt so a
   * retry reads the answer back from the claim it collided with: a field of its own, never a
   * second record. Absent until settled with one.
   */
  readonly answer?: JsonValue;
}

export type ClaimResult =
  | { readonly status: "claimed" }
  | { readonly status: "already_claimed"; readonly existing: StoredClaim };

export interface ClaimStore {
  /** Atomic insert-if-absent. Throws `TesseraError("claim_store_unavailable")` when it cannot tell. */
  claim(key: ClaimKey, record: ClaimRecord): Promise<ClaimResult>;
  /**
   * Records the outcome of a claimed call, and its answer when given (JSON-safe, at most
   * `MAX_ANSWER_BYTES` as JSON; `invalid_input` otherwise). The first outcome stands (an
   * outcome is a fact, not a setting): settling again changes neither receipt nor answer. A
   * key with no claim is `invalid_input`.
   */
  settle(key: ClaimKey, receipt: ClaimReceipt, answer?: JsonValue): Promise<void>;
  get(key: ClaimKey): Promise<StoredClaim | undefined>;
  /** Claims never settled (their worker died between claim and outcome), oldest first. */
  listInDoubt(session?: string): Promise<StoredClaim[]>;
  /** Forgets a finished session's claims (the session ID is never reused by the host). */
  endSession(session: string): Promise<void>;
  close(): Promise<void>;
}

/**
 * A claim store opened to be read (`openClaimReader(url)`): what an operator's listing needs
 * and nothing that writes, so a listing cannot claim, settle or forget a call, whatever the
 * connection's credentials would allow. `close()` closes its connection.
 */
export interface ClaimReader {
  get(key: ClaimKey): Promise<StoredClaim | undefined>;
  /** Claims never settled (their worker died between claim and outcome), oldest first. */
  listInDoubt(session?: string): Promise<StoredClaim[]>;
  close(): Promise<void>;
}

/**
 * The storage key every store derives from (session, ID): a `storageDigest` of both, so no
 * input can reach outside a directory or a key space, no pair can collide by concatenation,
 * and IDs differing only in a lone surrogate stay apart.
 */
export function claimKeyDigest(key: ClaimKey): string {
  return uniqueStorageDigest(key.session, key.functionCallId);
}
