import {
  type ClaimStore,
  type Closable,
  type GrantStore,
  type GrantUsageStore,
  openStores,
  type ReadableAuditSink,
  type StoreBundle,
} from "@tessera/core";
import { describe, expect, it } from "vitest";
import { expectClosedStoresRefuse } from "./closed-stores.js";
import { errorCode } from "./errors.js";

/** What every backend package exports to be opened by URL. */
export interface BackendOpeners {
  openStores(url: string): Promise<StoreBundle>;
  openClaimStore(url: string): Promise<ClaimStore>;
  openUsageStore(url: string): Promise<Closable<GrantUsageStore>>;
  openGrantStore(url: string): Promise<Closable<GrantStore>>;
  openAuditSink(url: string): Promise<Closable<ReadableAuditSink>>;
}

export interface BundleFactory {
  /** The backend package's module (`import * as backend from "@tessera/sqlite"`). */
  readonly backend: BackendOpeners;
  /** The URL of a fresh, empty store, and how to remove it after the test. */
  fresh(): Promise<{ readonly url: string; remove(): Promise<void> }>;
  /**
   * A URL of this backend with nothing behind it (a port nothing listens on, a directory
   * that does not exist). It should carry a password where the scheme has one: the suite
   * checks that no error message repeats it.
   */
  readonly unreachableUrl: string;
}

/** Each opener and the code it fails with when its store cannot be reached. */
const OPENERS = [
  ["openStores", "store_unavailable"],
  ["openClaimStore", "claim_store_unavailable"],
  ["openUsageStore", "usage_store_unavailable"],
  ["openGrantStore", "grant_store_unavailable"],
  ["openAuditSink", "audit_unavailable"],
] as const;

async function failureOf(action: () => Promise<unknown>): Promise<Error> {
  try {
    const opened = (await action()) as { close?: () => Promise<void> };
    await opened.close?.();
  } catch (error) {
    if (error instanceof Error) return error;
    throw error;
  }
  return expect.fail("expected the open to fail, but it resolved");
}

/** Options every backend reads the same way, each with a value none of them accepts. */
const BAD_OPTIONS = [["selfTest", "maybe"]] as const;

/**
 * The `openStores(url)` contract every backend shares: core's `openStores` reaches the
 * backend by its URL and hands back one `StoreBundle`; a bundle's claim store closes alone;
 * a store that cannot be reached fails each opener with that opener's code, in one message
 * shape, with the driver's error as `cause` and no password in the text; an option value
 * the backend refuses is `invalid_config`. Once per backend these drifted apart.
 */
export function describeStoreBundleConformance(name: string, factory: BundleFactory): void {
  describe(`StoreBundle conformance: ${name}`, () => {
    it("core's openStores(url) opens this backend's bundle, whose close() closes every port", async () => {
      const { url, remove } = await factory.fresh();
      try {
        const stores = await openStores(url);
        expect(Object.isFrozen(stores)).toBe(true);
        expect(Object.keys(stores).sort()).toEqual([
          "acts",
          "audit",
          "claims",
          "close",
          "grants",
          "usage",
        ]);
        expect(await stores.usage.tryConsume("ns", "g", 1)).toEqual({ consumed: true, used: 1 });
        await stores.close();
        await expectClosedStoresRefuse(stores);
        // The backend's own openStores sees what core's wrote: one store, two doors.
        const again = await factory.backend.openStores(url);
        expect(await again.usage.getUsage("ns", "g")).toBe(1);
        await again.close();
      } finally {
        await remove();
      }
    });

    it("closing a bundle's claim store closes that port only: the bundle owns the connection", async () => {
      const { url, remove } = await factory.fresh();
      try {
        const stores = await factory.backend.openStores(url);
        await stores.claims.close();
        expect(errorCode(await failureOf(() => stores.claims.listInDoubt()))).toBe(
          "claim_store_unavailable",
        );
        expect(await stores.usage.tryConsume("ns", "g", 1)).toEqual({ consumed: true, used: 1 });
        expect(await stores.grants.listNamespace("ns")).toEqual([]);
        expect(await stores.audit.read()).toEqual([]);
        await stores.close();
      } finally {
        await remove();
      }
    });

    it("a store it cannot reach fails each opener with its own code, one message shape, the cause kept", async () => {
      const secret = new URL(factory.unreachableUrl, "file:").password;
      for (const [opener, code] of OPENERS) {
        const error = await failureOf(() => factory.backend[opener](factory.unreachableUrl));
        expect(errorCode(error), opener).toBe(code);
        expect(error.message, opener).toMatch(/^could not open the \w+ store \(.+\)$/);
        expect(error.cause, opener).toBeDefined();
        expect(error.message, opener).not.toContain(factory.unreachableUrl);
        if (secret !== "") expect(error.message, opener).not.toContain(secret);
      }
    });

    it("an option value it refuses is invalid_config from every opener and from core's openStores", async () => {
      const { url, remove } = await factory.fresh();
      try {
        for (const [name, value] of BAD_OPTIONS) {
          const bad = `${url}${url.includes("?") ? "&" : "?"}${name}=${value}`;
          for (const [opener] of OPENERS) {
            const error = await failureOf(() => factory.backend[opener](bad));
            expect(errorCode(error), `${opener} ${name}=${value}`).toBe("invalid_config");
          }
          expect(errorCode(await failureOf(() => openStores(bad)))).toBe("invalid_config");
        }
      } finally {
        await remove();
      }
    });
  });
}
