import { checkCarve, checkId, checkMaxUses } from "../contracts/store-input.js";
import { answersSynchronously } from "../kernel/sync-ports.js";
import type { ConsumeResult, GrantUsageStore, ReleaseResult } from "../ports/usage-store.js";

/**
 * Usage counts in one process's memory. `tryConsume` reads and writes without yielding to the
 * event loop, so it is atomic against every other caller in this process — and only this
 * process: hosts with several workers need a shared store (SQLite, PostgreSQL, Redis).
 */
export class InMemoryGrantUsageStore implements GrantUsageStore {
  /** namespace → grant → uses. Nested maps: no key can be forged by concatenation. */
  readonly #used = new Map<string, Map<string, number>>();

  async getUsage(namespaceId: string, grantId: string): Promise<number> {
    checkId(namespaceId, "namespaceId");
    checkId(grantId, "grantId");
    return this.#used.get(namespaceId)?.get(grantId) ?? 0;
  }

  async tryConsume(namespaceId: string, grantId: string, maxUses: number): Promise<ConsumeResult> {
    return this.#consume(namespaceId, grantId, maxUses);
  }

  static {
    // The kernel spends in-memory uses without awaiting: see kernel/sync-ports.ts.
    answersSynchronously(InMemoryGrantUsageStore.prototype.tryConsume, (store, ns, id, max) =>
      (store as InMemoryGrantUsageStore).#consume(ns, id, max),
    );
  }

  #consume(namespaceId: string, grantId: string, maxUses: number): ConsumeResult {
    checkId(namespaceId, "namespaceId");
    checkId(grantId, "grantId");
    checkMaxUses(maxUses);
    let grants = this.#used.get(namespaceId);
    if (grants === undefined) {
      grants = new Map();
      this.#used.set(namespaceId, grants);
    }
    const used = grants.get(grantId) ?? 0;
    if (used >= maxUses) return { consumed: false, used };
    grants.set(grantId, used + 1);
    return { consumed: true, used: used + 1 };
  }

  async release(namespaceId: string, grantId: string): Promise<ReleaseResult> {
    checkId(namespaceId, "namespaceId");
    checkId(grantId, "grantId");
    const grants = this.#used.get(namespaceId);
    const used = grants?.get(grantId) ?? 0;
    if (grants === undefined || used === 0) return { released: false, used: 0 };
    grants.set(grantId, used - 1);
    return { released: true, used: used - 1 };
  }

  async tryConsumeMany(
    namespaceId: string,
    grantId: string,
    count: number,
    maxUses: number,
  ): Promise<ConsumeResult> {
    checkCarve(namespaceId, grantId, count, maxUses);
    let grants = this.#used.get(namespaceId);
    if (grants === undefined) {
      grants = new Map();
      this.#used.set(namespaceId, grants);
    }
    const used = grants.get(grantId) ?? 0;
    // All or nothing: a partial spend would leave the parent short with no child to show for it.
    if (used + count > maxUses) return { consumed: false, used };
    grants.set(grantId, used + count);
    return { consumed: true, used: used + count };
  }
}
