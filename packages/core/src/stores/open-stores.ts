import { createRequire } from "node:module";
import type { ClaimReader } from "../contracts/claims.js";
import { TesseraError } from "../contracts/errors.js";
import type { ReadableAuditSink } from "../ports/audit-sink.js";
import type { Closable, StoreBundle } from "../ports/stores.js";
import { readOnly, readOnlyClaims } from "./backend.js";

/**
 * URL scheme → the backend package that serves it. Each is an optional peer dependency of
 * this package, loaded only when a URL names it: a host pays only for the database it uses.
 */
const BACKENDS: Readonly<Record<string, string>> = Object.freeze({
  "sqlite:": "@tessera/sqlite",
  "postgres:": "@tessera/postgres",
  "postgresql:": "@tessera/postgres",
  "redis:": "@tessera/redis",
  "rediss:": "@tessera/redis",
});

/**
 * The package that serves a store URL (`sqlite:…` → `@tessera/sqlite`). Throws
 * `unsupported_store_url` for any other scheme. Pure: nothing is loaded or opened.
 */
export function storePackageFor(url: string): string {
  const scheme =
    typeof url === "string" ? /^[a-z][a-z0-9+.-]*:/i.exec(url)?.[0]?.toLowerCase() : undefined;
  const name = scheme === undefined ? undefined : BACKENDS[scheme];
  if (name === undefined) {
    throw new TesseraError(
      "unsupported_store_url",
      `unsupported store URL scheme ${scheme ?? "(none)"}; use sqlite:PATH, postgres://… or redis://…`,
    );
  }
  return name;
}

interface BackendModule {
  openStores(url: string): Promise<StoreBundle>;
  /** Absent from a backend package older than it: such a trail is opened as `openStores` opens it. */
  openAuditReader?(url: string): Promise<Closable<ReadableAuditSink>>;
  /** Absent from a backend package older than it: such claims are opened as `openStores` opens them. */
  openClaimReader?(url: string): Promise<ClaimReader>;
}

/**
 * Opens every port of the store a URL names, through its backend package's own
 * `openStores(url)`: `sqlite:./tessera.db`, `postgres://…`, `redis://…`. A scheme no backend
 * serves, or whose package is not installed, is `unsupported_store_url` (the message names
 * the package to install); opening failures are the backend's (`store_unavailable`, …).
 */
export async function openStores(url: string): Promise<StoreBundle> {
  const name = storePackageFor(url);
  const backend = await loadBackend(name);
  return backend.openStores(url);
}

/**
 * The audit trail of the store a URL names, opened to be read and nothing else: no migration,
 * no self-test, a read-only connection where the backend has one (the backend's own
 * `openAuditReader`). So an auditor's read-only role, or a read replica, can list and verify.
 */
export async function openAuditReader(url: string): Promise<Closable<ReadableAuditSink>> {
  const name = storePackageFor(url);
  const backend = await loadBackend(name);
  if (backend.openAuditReader !== undefined) return backend.openAuditReader(url);
  const stores = await backend.openStores(url);
  return readOnly(stores.audit, () => stores.close());
}

/**
 * The claims of the store a URL names, opened to be listed and nothing else (the backend's own
 * `openClaimReader`): no migration, no self-test, a read-only connection where the backend has
 * one. A store older than this build is `schema_unavailable` and left as it is; a writer's
 * open (`openStores`) is what upgrades it.
 */
export async function openClaimReader(url: string): Promise<ClaimReader> {
  const name = storePackageFor(url);
  const backend = await loadBackend(name);
  if (backend.openClaimReader !== undefined) return backend.openClaimReader(url);
  const stores = await backend.openStores(url);
  return readOnlyClaims(stores.claims, () => stores.close());
}

async function loadBackend(name: string): Promise<BackendModule> {
  let module: Partial<BackendModule>;
  try {
    module = (await import(name)) as Partial<BackendModule>;
  } catch (error) {
    // Told apart by resolving, not by reading the error's text: a package that is installed
    // but fails to load (its driver missing, say) is reported as it is.
    if (!isInstalled(name)) {
      throw new TesseraError(
        "unsupported_store_url",
        `this store URL needs ${name}, which is not installed: npm install ${name}`,
        { cause: error },
      );
    }
    throw error;
  }
  if (typeof module.openStores !== "function") {
    throw new TesseraError("unsupported_store_url", `${name} does not export openStores(url)`);
  }
  return module as BackendModule;
}

function isInstalled(name: string): boolean {
  try {
    createRequire(import.meta.url).resolve(name);
    return true;
  } catch {
    return false;
  }
}
