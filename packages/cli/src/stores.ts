import {
  type ClaimStore,
  type GrantStore,
  type GrantUsageStore,
  type ReadableAuditSink,
  TesseraError,
} from "@tessera/core";

/** What every backend's `openStores(url)` returns. */
export interface OpenedStores {
  readonly usage: GrantUsageStore;
  readonly claims: ClaimStore;
  readonly grants: GrantStore;
  readonly audit: ReadableAuditSink;
  close(): Promise<void>;
}

/** URL scheme → the package that serves it. Loaded lazily: a host pays only for its database. */
const BACKENDS: Record<string, string> = {
  "sqlite:": "@tessera/sqlite",
  "postgres:": "@tessera/postgres",
  "postgresql:": "@tessera/postgres",
  "redis:": "@tessera/redis",
  "rediss:": "@tessera/redis",
};

export function backendFor(url: string): string {
  const scheme = /^[a-z][a-z0-9+.-]*:/i.exec(url)?.[0]?.toLowerCase();
  const backend = scheme ? BACKENDS[scheme] : undefined;
  if (!backend) {
    throw new TesseraError(
      "unsupported_store_url",
      `unsupported store URL scheme ${scheme ?? "(none)"}; use sqlite:PATH, postgres://… or redis://…`,
    );
  }
  return backend;
}

export async function openStoresByUrl(url: string): Promise<OpenedStores> {
  const backend = backendFor(url);
  const module = (await import(backend)) as { openStores(url: string): Promise<OpenedStores> };
  return module.openStores(url);
}
