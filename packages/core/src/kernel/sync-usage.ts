import type { ConsumeResult, GrantUsageStore } from "../ports/usage-store.js";

/**
 * A `tryConsume` that can answer without yielding: the in-memory store's, whose atomicity is
 * that it never yields anyway. The kernel calls it directly instead of awaiting the promise the
 * port returns, so a bounded decision in memory costs no microtask (two async frames and their
 * promises per send, about a third of a fan-out's send loop). The answer is the one the method
 * would resolve to; a throw is the rejection it would give.
 *
 * Keyed by the method itself, not by the store's class: a subclass or an instance that replaces
 * `tryConsume` (a spy, a wrapper that logs or fails) is called through the port as usual.
 */
export type ConsumeNow = (
  store: GrantUsageStore,
  namespaceId: string,
  grantId: string,
  maxUses: number,
) => ConsumeResult;

const SYNCHRONOUS = new WeakMap<GrantUsageStore["tryConsume"], ConsumeNow>();

/** Registers the synchronous twin of a `tryConsume` implementation. */
export function answersSynchronously(
  tryConsume: GrantUsageStore["tryConsume"],
  consumeNow: ConsumeNow,
): void {
  SYNCHRONOUS.set(tryConsume, consumeNow);
}

/** The synchronous twin of `usage.tryConsume`, when it has one. */
export function consumeNowOf(usage: GrantUsageStore): ConsumeNow | undefined {
  const method = usage.tryConsume;
  return typeof method === "function" ? SYNCHRONOUS.get(method) : undefined;
}
