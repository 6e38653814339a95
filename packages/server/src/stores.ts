import type { StoreBundle } from "@tessera/core";

/**
 * The ports the service touches: any `StoreBundle` from `openStores(url)` serves. Without
 * `acts`, the service composes one of the other ports (`composeActLedger`: claim, spend and
 * event written one after another, not in one transaction).
 *
 * A file of its own, importing nothing of the service: the app, the metrics, the write rounds
 * and the readiness probe all take it, and the service's entry imports the app.
 */
export type ServiceStores = Pick<StoreBundle, "grants" | "usage" | "audit" | "claims"> & {
  readonly acts?: StoreBundle["acts"];
};
