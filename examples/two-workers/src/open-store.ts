import { type ClaimStore, TesseraError } from "@tessera/core";
import { backendFor } from "./protocol.js";

export interface OpenedClaims {
  readonly claims: ClaimStore;
  close(): Promise<void>;
}

/**
 * Opens a shared claim store by URL through the backend package's `openStores(url)`. The
 * packages are loaded only when asked for, so the demo does not depend on any database.
 */
export async function openClaimsByUrl(url: string): Promise<OpenedClaims> {
  const backend = backendFor(url);
  if (!backend) {
    throw new TesseraError(
      "unsupported_store_url",
      "the store URL must start with sqlite:, postgres:// or redis://",
    );
  }
  const specifier = `@tessera/${backend}`;
  const module = (await import(specifier)) as {
    openStores(url: string): Promise<{ claims: ClaimStore; close(): Promise<void> }>;
  };
  const stores = await module.openStores(url);
  return { claims: stores.claims, close: () => stores.close() };
}
