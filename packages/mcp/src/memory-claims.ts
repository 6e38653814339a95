import type {
  ClaimKey,
  ClaimReceipt,
  ClaimRecord,
  ClaimResult,
  ClaimStore,
  StoredClaim,
} from "@tessera/core";
import { TesseraError } from "@tessera/core";
import { claimKeyDigest } from "@tessera/core/store-kit";

/**
 * One process only: what the gateway uses when no store URL is given. Two gateway processes
 * need a shared store (`postgres://…`, `redis://…`) to refuse each other's replays.
 */
export class InMemoryMcpClaimStore implements ClaimStore {
  readonly #claims = new Map<string, StoredClaim>();
  #closed = false;

  async claim(key: ClaimKey, record: ClaimRecord): Promise<ClaimResult> {
    this.#open();
    const digest = claimKeyDigest(key);
    const existing = this.#claims.get(digest);
    if (existing !== undefined) return { status: "already_claimed", existing };
    this.#claims.set(digest, Object.freeze({ ...key, ...record }));
    return { status: "claimed" };
  }

  async settle(key: ClaimKey, receipt: ClaimReceipt): Promise<void> {
    this.#open();
    const digest = claimKeyDigest(key);
    const existing = this.#claims.get(digest);
    if (existing === undefined) throw new TesseraError("invalid_input", "no claim to settle");
    if (existing.receipt !== undefined) return;
    this.#claims.set(digest, Object.freeze({ ...existing, receipt: { ...receipt } }));
  }

  async get(key: ClaimKey): Promise<StoredClaim | undefined> {
    this.#open();
    return this.#claims.get(claimKeyDigest(key));
  }

  async listInDoubt(session?: string): Promise<StoredClaim[]> {
    this.#open();
    return [...this.#claims.values()]
      .filter((c) => c.receipt === undefined && (session === undefined || c.session === session))
      .sort((a, b) => a.claimedAt - b.claimedAt);
  }

  async endSession(session: string): Promise<void> {
    this.#open();
    for (const [digest, claim] of this.#claims) {
      if (claim.session === session) this.#claims.delete(digest);
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
  }

  #open(): void {
    if (this.#closed)
      throw new TesseraError("claim_store_unavailable", "the claim store is closed");
  }
}
