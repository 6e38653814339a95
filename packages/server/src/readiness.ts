import type { ServiceStores } from "./stores.js";

/** Names no grant or call can have a use for; the probe reads them and expects nothing. */
const PROBE = "tessera.readyz";

/**
 * `GET /readyz`: can the service take a decision now? One cheap read from each port a
 * decision touches (grants, usage, audit, claims). Anyone may ask, so concurrent probes share one
 * read: a flood of probes costs the store one query per port at a time, not one per request.
 */
export function readinessProbe(
  stores: ServiceStores,
  auditFailing: () => boolean = () => false,
): () => Promise<boolean> {
  let running: Promise<boolean> | undefined;
  return () => {
    // Denial events the sink refused after their replies are still kept: until the kernel's
    // background retry writes them, refusals answer 503 (the kernel fails closed), so the
    // instance is not ready either. The retry needs no request, so a drained instance recovers.
    if (auditFailing()) return Promise.resolve(false);
    running ??= probe(stores).finally(() => {
      running = undefined;
    });
    return running;
  };
}

async function probe(stores: ServiceStores): Promise<boolean> {
  try {
    await Promise.all([
      stores.grants.listGrants(PROBE, PROBE),
      stores.usage.getUsage(PROBE, PROBE),
      stores.audit.read({ callId: PROBE, limit: 1 }),
      stores.claims.get({ session: PROBE, functionCallId: PROBE }),
    ]);
    return true;
  } catch {
    return false;
  }
}
