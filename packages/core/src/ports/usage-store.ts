/**
 * Counts uses of bounded grants. `tryConsume` must be atomic: two callers racing for the last
 * use of a grant, in one process or many, get exactly one `consumed: true`.
 * Implementations throw `TesseraError("usage_store_unavailable")` when they cannot answer;
 * the kernel then fails closed.
 */
export interface GrantUsageStore {
  getUsage(namespaceId: string, grantId: string): Promise<number>;
  tryConsume(namespaceId: string, grantId: string, maxUses: number): Promise<ConsumeResult>;
}

export interface ConsumeResult {
  readonly consumed: boolean;
  /** Uses recorded after this call. */
  readonly used: number;
}
