import type { ConsumeResult, GrantUsageStore } from "../ports/usage-store.js";

/**
 * Usage counts in one process's memory. `tryConsume` reads and writes without yielding to the
 * event loop, so it is atomic against every other caller in this process — and only this
 * process: hosts with several workers need a shared store (SQLite, PostgreSQL, Redis).
 */
export class InMemoryGrantUsageStore implements GrantUsageStore {
  readonly #used = new Map<string, number>();

  #key(namespaceId: string, grantId: string): string {
    return `${namespaceId.length}:${namespaceId}${grantId}`;
  }

  async getUsage(namespaceId: string, grantId: string): Promise<number> {
    return this.#used.get(this.#key(namespaceId, grantId)) ?? 0;
  }

  async tryConsume(namespaceId: string, grantId: string, maxUses: number): Promise<ConsumeResult> {
    const key = this.#key(namespaceId, grantId);
    const used = this.#used.get(key) ?? 0;
    if (used >= maxUses) return { consumed: false, used };
    this.#used.set(key, used + 1);
    return { consumed: true, used: used + 1 };
  }
}
