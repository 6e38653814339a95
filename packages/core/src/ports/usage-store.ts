/**
 * Counts uses of bounded grants. `tryConsume` must be atomic: two callers racing for the last
 * use of a grant, in one process or many, get exactly one `consumed: true`.
 * Implementations throw `TesseraError("usage_store_unavailable")` when they cannot answer;
 * the kernel then fails closed.
 */
export interface GrantUsageStore {
  getUsage(namespaceId: string, grantId: string): Promise<number>;
  tryConsume(namespaceId: string, grantId: string, maxUses: number): Promise<ConsumeResult>;
  /**
   * Spends `count` uses at once, all or nothing: consumed only when `used + count <= maxUses`,
   * otherwise nothing is recorded. Atomic like `tryConsume`, against it and against itself.
   * Carving a bounded child grant out of its parent needs it (see `carveDelegatedUses`);
   * optional so a store written before delegation still serves the kernel. Every store
   * Tessera ships has it.
   */
  tryConsumeMany?(
    namespaceId: string,
    grantId: string,
    count: number,
    maxUses: number,
  ): Promise<ConsumeResult>;
  /**
   * Gives one use back, atomically, never below zero: for an act that provably never
   * happened (its transport reports nothing was sent), so the ticket it spent stays usable.
   * Atomic like `tryConsume`, against it and against itself: N racing releases of a grant
   * used k times give back min(N, k). Optional: without it a use is never returned (the act
   * stays spent, as it always was). Every store Tessera ships has it.
   */
  release?(namespaceId: string, grantId: string): Promise<ReleaseResult>;
}

/**
 * The optional half of `GrantUsageStore` that gives a use back (see `release`). Kept apart so
 * that `GrantUsageStore` reads as the counting port and a store written before it still fits.
 */
export interface ReleaseResult {
  /** True when one use was given back; false when the count was already zero. */
  readonly released: boolean;
  /** Uses recorded after this call. */
  readonly used: number;
}

export interface ConsumeResult {
  readonly consumed: boolean;
  /** Uses recorded after this call. */
  readonly used: number;
}
