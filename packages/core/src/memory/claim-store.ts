import type {
  ClaimKey,
  ClaimReceipt,
  ClaimRecord,
  ClaimResult,
  ClaimStore,
  JsonValue,
  StoredClaim,
} from "../contracts/claims.js";
import { TesseraError } from "../contracts/errors.js";
import {
  checkClaimKey,
  checkReceipt,
  checkRecord,
  checkSession,
  serializeAnswer,
} from "../contracts/store-input.js";

/**
 * Claims kept in this process's memory. Correct inside one process and wrong across two:
 * each worker has its own map, so two workers both "claim" the same ID. It is the "before"
 * of the two-workers demo and the store for single-process hosts and tests (the A2UI gate and
 * the MCP gateway both use it when no shared store is configured).
 */
export class InMemoryClaimStore implements ClaimStore {
  /** session → functionCallId → claim: no hashing needed, and endSession drops one entry. */
  readonly #sessions = new Map<string, Map<string, StoredClaim>>();

  async claim(key: ClaimKey, record: ClaimRecord): Promise<ClaimResult> {
    checkClaimKey(key);
    checkRecord(record);
    let claims = this.#sessions.get(key.session);
    if (!claims) {
      claims = new Map();
      this.#sessions.set(key.session, claims);
    }
    const existing = claims.get(key.functionCallId);
    if (existing) return Object.freeze({ status: "already_claimed", existing });
    claims.set(key.functionCallId, storedClaim(key, record));
    return CLAIMED;
  }

  async settle(key: ClaimKey, receipt: ClaimReceipt, answer?: JsonValue): Promise<void> {
    checkClaimKey(key);
    checkReceipt(receipt);
    const text = serializeAnswer(answer);
    const claims = this.#sessions.get(key.session);
    const existing = claims?.get(key.functionCallId);
    if (!claims || !existing) throw new TesseraError("invalid_input", "settle: no such claim");
    if (existing.receipt) return; // the first outcome stands
    const settled = Object.freeze({ status: receipt.status, settledAt: receipt.settledAt });
    // A copy of the answer as it was checked: the caller's object may change after the settle.
    const kept = text === undefined ? {} : { answer: deepFreeze(JSON.parse(text) as JsonValue) };
    claims.set(
      key.functionCallId,
      Object.freeze(Object.assign({}, existing, { receipt: settled }, kept)),
    );
  }

  async get(key: ClaimKey): Promise<StoredClaim | undefined> {
    checkClaimKey(key);
    return this.#sessions.get(key.session)?.get(key.functionCallId);
  }

  async listInDoubt(session?: string): Promise<StoredClaim[]> {
    checkSession(session, true);
    const sessions =
      session === undefined ? [...this.#sessions.values()] : [this.#sessions.get(session)];
    return sessions
      .flatMap((claims) =>
        claims ? [...claims.values()].filter((claim) => claim.receipt === undefined) : [],
      )
      .sort((a, b) => a.claimedAt - b.claimedAt);
  }

  async endSession(session: string): Promise<void> {
    checkSession(session);
    this.#sessions.delete(session);
  }

  async close(): Promise<void> {
    this.#sessions.clear();
  }
}

function deepFreeze(value: JsonValue): JsonValue {
  if (typeof value === "object" && value !== null) {
    for (const member of Object.values(value)) deepFreeze(member as JsonValue);
    Object.freeze(value);
  }
  return value;
}

const CLAIMED: ClaimResult = Object.freeze({ status: "claimed" });

function storedClaim(key: ClaimKey, record: ClaimRecord): StoredClaim {
  return Object.freeze({
    session: key.session,
    functionCallId: key.functionCallId,
    bodyHash: record.bodyHash,
    claimedAt: record.claimedAt,
    ...(record.worker === undefined ? {} : { worker: record.worker }),
  });
}
