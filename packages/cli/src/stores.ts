import {
  type ClaimStore,
  type GrantStore,
  type GrantUsageStore,
  type ReadableAuditSink,
  TesseraError,
} from "@tessera/core";
import { explainOpenFailure } from "./open-failure.js";

/** What every backend's `openStores(url)` returns. */
export interface OpenedStores {
  readonly usage: GrantUsageStore;
  readonly claims: ClaimStore;
  readonly grants: GrantStore;
  readonly audit: ReadableAuditSink;
  close(): Promise<void>;
}

/** A backend package and the name of its (pure, offline) URL parser. */
interface Backend {
  readonly name: string;
  readonly parser: string;
}

/** URL scheme → the package that serves it. Loaded lazily: a host pays only for its database. */
const BACKENDS: Record<string, Backend> = {
  "sqlite:": { name: "@tessera/sqlite", parser: "parseSqliteUrl" },
  "postgres:": { name: "@tessera/postgres", parser: "parsePostgresUrl" },
  "postgresql:": { name: "@tessera/postgres", parser: "parsePostgresUrl" },
  "redis:": { name: "@tessera/redis", parser: "parseRedisUrl" },
  "rediss:": { name: "@tessera/redis", parser: "parseRedisUrl" },
};

export function backendFor(url: string): Backend {
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
  const module = (await import(backend.name)) as {
    openStores(url: string): Promise<OpenedStores>;
  } & Record<string, unknown>;
  try {
    return await module.openStores(url);
  } catch (error) {
    const parse = module[backend.parser] as (url: string) => unknown;
    throw await explainOpenFailure(error, url, parse);
  }
}
