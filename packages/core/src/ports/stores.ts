import type { ClaimStore } from "../contracts/claims.js";
import type { ActLedger } from "./act-ledger.js";
import type { ReadableAuditSink } from "./audit-sink.js";
import type { GrantStore } from "./grant-source.js";
import type { GrantUsageStore } from "./usage-store.js";

/** A port that owns its connection: `close()` releases it, and the port refuses afterwards. */
export type Closable<Port> = Port & { close(): Promise<void> };

/**
 * Every port a backend serves, over one connection: what `openStores(url)` returns, whichever
 * backend the URL names.
 */
export interface StoreBundle {
  readonly usage: GrantUsageStore;
  readonly claims: ClaimStore;
  readonly grants: GrantStore;
  readonly audit: ReadableAuditSink;
  /**
   * The act ledger over the same connection: claim, spend and event of one act in one
   * transaction where the backend has one (`composeActLedger` of the ports above where not).
   */
  readonly acts: ActLedger;
  /**
   * Closes the connection; every port refuses afterwards with its `*_unavailable` code. A
   * port's own `close()` (the claim store's) closes that port only: the bundle owns the
   * connection.
   *
   * One rule on every backend: an idle connection never keeps the process alive. A process
   * whose work is done exits whether it closed the bundle, one port or nothing (SQLite holds
   * a file; PostgreSQL's idle pool clients and Redis's socket between replies do not hold
   * the event loop), and never while a store call awaits its answer. `close()` releases the
   * connection at once; call it to stop cleanly.
   */
  close(): Promise<void>;
}
