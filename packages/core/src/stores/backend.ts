import type { ClaimKey, ClaimReader, ClaimStore } from "../contracts/claims.js";
import { isTesseraError, TesseraError } from "../contracts/errors.js";
import type { ActLedger } from "../ports/act-ledger.js";
import type { AuditFilter, ReadableAuditSink } from "../ports/audit-sink.js";
import type { GrantStore } from "../ports/grant-source.js";
import type { Closable, StoreBundle } from "../ports/stores.js";
import type { GrantUsageStore } from "../ports/usage-store.js";
import { composeActLedger } from "./composed-act-ledger.js";

/** The code an opener fails with when its backend cannot be reached: one per port, and the bundle's. */
export type OpenFailCode =
  | "store_unavailable"
  | "claim_store_unavailable"
  | "usage_store_unavailable"
  | "grant_store_unavailable"
  | "audit_unavailable";

/**
 * What a backend supplies to be opened by URL: how to connect, how to make the connection fit
 * for use (migrations, self-test), and its ports over one connection. `storeOpeners` does the
 * rest the same way for every backend: failure mapping, closing what was opened, bundling.
 */
export interface StoreBackend<Connection> {
  /** For people: `SQLite`, `PostgreSQL`, `Redis`. */
  readonly name: string;
  /**
   * Parses the URL (`invalid_config` when it is wrong) and connects. With `readOnly` (a
   * reader's open, `openAuditReader`, `openClaimReader`) the connection writes nothing where
   * the backend can make it so (PostgreSQL: read-only transactions).
   */
  connect(url: string, options?: ConnectOptions): Connection | Promise<Connection>;
  /** Migrates and self-tests; the connection is closed when this throws. */
  prepare(connection: Connection): void | Promise<void>;
  /**
   * Makes a reader's connection fit for reading, writing nothing: the store is there, at a
   * layout this release reads (an older one too, a newer one is refused with
   * `schema_unavailable`). A backend without it opens readers as writers (`prepare`).
   */
  inspect?(connection: Connection): void | Promise<void>;
  /**
   * The version the store is at and this build's, read writing nothing once `inspect` has
   * passed (SQLite and PostgreSQL: the schema version; Redis: the layout version). A claim
   * reader (`openClaimReader`) reads claims only at this build's version, since an older
   * layout may keep them otherwise, and refuses an older store rather than migrate it. A
   * backend without it (or without `inspect`) opens claim readers as writers: `prepare`, which
   * migrates an older store, then only the reads are handed out.
   */
  version?(connection: Connection): StoreVersion | Promise<StoreVersion>;
  disconnect(connection: Connection): void | Promise<void>;
  usage(connection: Connection): GrantUsageStore;
  grants(connection: Connection): GrantStore;
  audit(connection: Connection): ReadableAuditSink;
  /** `release`, when given, is called by the claim store's `close()`: it owns the connection. */
  claims(connection: Connection, release?: () => Promise<void>): ClaimStore;
  /**
   * The act ledger over the connection, recording an act in one transaction. Without it the
   * bundle composes the ports above (`composeActLedger`), one write after another.
   */
  acts?(connection: Connection): ActLedger;
}

export interface ConnectOptions {
  readonly readOnly?: boolean;
}

/** A store's layout version (`store`) beside the one this build writes (`build`). */
export interface StoreVersion {
  readonly store: number;
  readonly build: number;
}

/** The openers every backend exports, the bundle and each port alone. */
export interface StoreOpeners {
  openStores(url: string): Promise<StoreBundle>;
  /** The claim store alone (for the A2UI gate); its `close()` closes its connection. */
  openClaimStore(url: string): Promise<ClaimStore>;
  openUsageStore(url: string): Promise<Closable<GrantUsageStore>>;
  openGrantStore(url: string): Promise<Closable<GrantStore>>;
  openAuditSink(url: string): Promise<Closable<ReadableAuditSink>>;
  /**
   * The audit trail opened to be read, writing nothing: no migration, no self-test, and
   * where the backend allows it a read-only connection. What an auditor's read-only role, a
   * read replica or a store of a build not yet upgraded can serve (`tessera audit …`).
   */
  openAuditReader(url: string): Promise<Closable<ReadableAuditSink>>;
  /**
   * The claims opened to be listed, writing nothing, as `openAuditReader` opens the trail: a
   * store that is not there or newer than this build is `schema_unavailable`, and so is one
   * older than this build, which is left as it is (listing its claims would need it migrated:
   * a writer's open, such as `openStores` or this build's service, does that).
   */
  openClaimReader(url: string): Promise<ClaimReader>;
}

/**
 * The openers of a backend. Each opens its own connection; a bundle's ports share one,
 * which only the bundle's `close()` closes.
 */
export function storeOpeners<Connection>(backend: StoreBackend<Connection>): StoreOpeners {
  /** `reader`: opened to be read (`inspect`); `current`: and only at this build's version. */
  const open = async (
    url: string,
    failCode: OpenFailCode,
    reader = false,
    current = false,
  ): Promise<Connection> => {
    let connection: Connection;
    try {
      connection = await backend.connect(url, reader ? { readOnly: true } : {});
    } catch (error) {
      throw openFailure(error, failCode, backend.name);
    }
    try {
      if (reader && backend.inspect !== undefined) {
        await backend.inspect(connection);
        if (current && backend.version !== undefined) {
          refuseOlder(backend.name, await backend.version(connection));
        }
      } else await backend.prepare(connection);
      return connection;
    } catch (error) {
      try {
        await backend.disconnect(connection);
      } catch {
        // The open already failed; that failure is the one to report.
      }
      throw openFailure(error, failCode, backend.name);
    }
  };
  const closer = (connection: Connection) => async () => {
    await backend.disconnect(connection);
  };
  const withClose = <Port extends object>(port: Port, close: () => Promise<void>) =>
    Object.assign(port, { close }) as Closable<Port>;
  return Object.freeze({
    async openStores(url: string): Promise<StoreBundle> {
      const connection = await open(url, "store_unavailable");
      const usage = backend.usage(connection);
      const claims = backend.claims(connection);
      const audit = backend.audit(connection);
      return Object.freeze({
        usage,
        claims,
        grants: backend.grants(connection),
        audit,
        acts: backend.acts?.(connection) ?? composeActLedger({ claims, usage, audit }),
        close: closer(connection),
      });
    },
    async openClaimStore(url: string): Promise<ClaimStore> {
      const connection = await open(url, "claim_store_unavailable");
      return backend.claims(connection, closer(connection));
    },
    async openUsageStore(url: string): Promise<Closable<GrantUsageStore>> {
      const connection = await open(url, "usage_store_unavailable");
      return withClose(backend.usage(connection), closer(connection));
    },
    async openGrantStore(url: string): Promise<Closable<GrantStore>> {
      const connection = await open(url, "grant_store_unavailable");
      return withClose(backend.grants(connection), closer(connection));
    },
    async openAuditSink(url: string): Promise<Closable<ReadableAuditSink>> {
      const connection = await open(url, "audit_unavailable");
      return withClose(backend.audit(connection), closer(connection));
    },
    async openAuditReader(url: string): Promise<Closable<ReadableAuditSink>> {
      const connection = await open(url, "audit_unavailable", true);
      return readOnly(backend.audit(connection), closer(connection));
    },
    async openClaimReader(url: string): Promise<ClaimReader> {
      // Without a version to check, a reader's open could list an older layout wrongly: such a
      // backend's claims are opened as a writer's, as before claim readers.
      const reads = backend.version !== undefined;
      const connection = await open(url, "claim_store_unavailable", reads, reads);
      return readOnlyClaims(backend.claims(connection), closer(connection));
    },
  });
}

/** An older store is refused, said with what would upgrade it; the reader never does. */
function refuseOlder(name: string, { store, build }: StoreVersion): void {
  if (store >= build) return;
  throw new TesseraError(
    "schema_unavailable",
    `the ${name} store is at version ${store}, older than this build (${build}): listing its claims would need it upgraded, which a reader never does. A writer's open upgrades it (this build's service, or tessera claims --in-doubt --upgrade), once the older release's instances are stopped`,
  );
}

/**
 * `claims` as a listing holds them: the reads only, so nothing that claims, settles or forgets
 * a call is there to call, whatever the backend's credentials would have allowed.
 */
export function readOnlyClaims(claims: ClaimStore, close: () => Promise<void>): ClaimReader {
  return Object.freeze({
    get: (key: ClaimKey) => claims.get(key),
    listInDoubt: (session?: string) => claims.listInDoubt(session),
    close,
  });
}

/**
 * `audit` as a reader holds it: reads pass through, an append is refused here, whatever the
 * backend's credentials would have allowed.
 */
export function readOnly(
  audit: ReadableAuditSink,
  close: () => Promise<void>,
): Closable<ReadableAuditSink> {
  const pages = audit.readPages?.bind(audit);
  return Object.freeze({
    append(): never {
      throw new TesseraError("audit_unavailable", "this audit trail was opened to be read only");
    },
    read: (filter?: AuditFilter) => audit.read(filter),
    ...(pages === undefined ? {} : { readPages: pages }),
    close,
  });
}

/**
 * What an open failed with, in one shape for every backend. A finding about the store keeps its
 * own code (`invalid_config`, `store_self_test_failed`, `store_file_shared`,
 * `schema_unavailable`); anything else means the store could not be reached and becomes
 * `failCode`, "could not open the <name> store (<driver code>)", with the original as `cause`.
 * The message names the driver's code or error class, never its text (which may quote a URL
 * with its password, a key, a server's words).
 */
export function openFailure(error: unknown, failCode: OpenFailCode, name: string): TesseraError {
  if (isTesseraError(error) && !error.code.endsWith("_unavailable")) return error;
  if (isTesseraError(error, "schema_unavailable")) return error;
  return new TesseraError(failCode, `could not open the ${name} store (${driverCode(error)})`, {
    cause: error,
  });
}

/** The first code (or error class) below Tessera's own wrapping in the cause chain. */
function driverCode(error: unknown): string {
  let at: unknown = error;
  for (let depth = 0; depth < 8 && isTesseraError(at); depth++) at = at.cause;
  if (typeof at === "object" && at !== null) {
    const code = (at as { code?: unknown }).code;
    if (typeof code === "string" && code !== "") return code;
    if (at instanceof AggregateError && at.errors.length > 0) return driverCode(at.errors[0]);
    if (at instanceof Error) return at.name;
  }
  return isTesseraError(error) ? error.code : "unknown error";
}
