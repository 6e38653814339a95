/**
 * Every conformance suite against the SQLite backend, with 8 real OS processes sharing the
 * file (and gate workers sharing only the file), and an outage in which the file disappears from its path and comes back (the
 * write-lock outage, where reads keep working, is run under the kernel and the gate in
 * fail-closed.test.ts).
 */

import type { SqliteStores } from "@tessera/sqlite";
import {
  describeAuditSinkConformance,
  describeClaimStoreConformance,
  describeGateWorkersConformance,
  describeGrantStoreConformance,
  describeUsageStoreConformance,
  type StoreFactory,
} from "@tessera/testkit";
import { fileMovedOutage, type OpenedSqlite, openFresh } from "./helpers.js";

type Port = "usage" | "claims" | "grants" | "audit";

/**
 * The workers' busy timeout. These cases check exactness (one winner per key, no use spent
 * twice), not how long a write waits: SQLite's write lock keeps no queue, so with 8 processes
 * writing back to back one of them can lose it again and again, and on a loaded CI machine
 * one write once waited past the default 5 s and failed closed (docs/stores.md).
 */
const WORKER_BUSY_TIMEOUT_MS = 60_000;

/** A fresh file per test; a worker process opens the same file through `openStores`. */
function sqliteFactory<P extends Port>(
  port: P,
): StoreFactory<SqliteStores[P], OpenedSqlite & { store: SqliteStores[P] }> {
  return {
    open: async () => {
      const opened = await openFresh();
      return { ...opened, store: opened.stores[port] };
    },
    processSpec: (opened) => ({
      module: "@tessera/sqlite",
      exportName: "openStores",
      arg: `${opened.url}?busyTimeoutMs=${WORKER_BUSY_TIMEOUT_MS}`,
      pick: port,
    }),
    outage: (opened) => fileMovedOutage(opened.url),
  };
}

describeUsageStoreConformance("SQLite", sqliteFactory("usage"));
describeClaimStoreConformance("SQLite", sqliteFactory("claims"));
describeGateWorkersConformance("SQLite", sqliteFactory("claims"));
describeGrantStoreConformance("SQLite", sqliteFactory("grants"));
describeAuditSinkConformance("SQLite", sqliteFactory("audit"));
