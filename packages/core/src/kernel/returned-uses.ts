import type { GrantUsageStore, ReleaseResult } from "../ports/usage-store.js";

/**
 * Kernels remember which bounded grants they saw spent (the lease's `spent` marks, shared
 * through the turn cache), because usage used to only grow. A use given back breaks that: the
 * kernels over the same usage store must forget the mark, or they would keep refusing a
 * ticket the store holds unspent again. Each kernel registers a listener on its usage store;
 * `releaseUse` tells them. Held weakly both ways: a kernel dropped by its host (the MCP
 * gateway makes one per tool) is not kept alive by its store.
 */
interface Forgets {
  forget(namespaceId: string, grantId: string): void;
}

const LISTENERS = new WeakMap<GrantUsageStore, Set<WeakRef<Forgets>>>();

/** Registers a kernel's turn cache on its usage store (held weakly: the kernel keeps it). */
export function onUseReturned(usage: GrantUsageStore, forget: Forgets): void {
  let listeners = LISTENERS.get(usage);
  if (listeners === undefined) {
    listeners = new Set();
    LISTENERS.set(usage, listeners);
  }
  listeners.add(new WeakRef(forget));
}

/**
 * Gives one use of a bounded grant back, for an act that provably never happened (its
 * transport reports nothing was sent), and makes every kernel over `usage` in this process
 * forget that it saw the grant spent. Undefined when the store cannot give uses back (it has
 * no `release`): the use then stays spent. Throws what the store throws.
 *
 * Kernels in other processes over the same shared store may still hold the mark: they refuse
 * the ticket (never allow it twice) until that holder's cached grant set is read again.
 */
export async function releaseUse(
  usage: GrantUsageStore,
  namespaceId: string,
  grantId: string,
): Promise<ReleaseResult | undefined> {
  if (typeof usage.release !== "function") return undefined;
  const result = await usage.release(namespaceId, grantId);
  if (result.released) useReturned(usage, namespaceId, grantId);
  return result;
}

/**
 * Tells every kernel over `usage` in this process that one use of the grant came back by
 * another way than `releaseUse` (an act ledger's `withdraw`, which gives it back in its own
 * transaction): they forget that they saw the grant spent.
 */
export function useReturned(usage: GrantUsageStore, namespaceId: string, grantId: string): void {
  const listeners = LISTENERS.get(usage);
  for (const ref of listeners ?? []) {
    const cache = ref.deref();
    if (cache === undefined) listeners?.delete(ref);
    else cache.forget(namespaceId, grantId);
  }
}
