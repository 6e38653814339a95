/**
 * Every conformance suite against the SQLite backend, with 8 real OS processes sharing the
 * file and a write-lock outage held by another connection.
 */

import type { SqliteStores } from "@tessera/sqlite";
import {
  describeAuditSinkConformance,
  describeClaimStoreConformance,
  describeGrantStoreConformance,
  describeUsageStoreConformance,
  type StoreFactory,
} from "@tessera/testkit";
import { type OpenedSqlite, openFresh, writeLockOutage } from "./helpers.js";

type Port = "usage" | "claims" | "grants" | "audit";

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
      arg: opened.url,
      pick: port,
    }),
    outage: (opened) => writeLockOutage(opened.url),
  };
}

describeUsageStoreConformance("SQLite", sqliteFactory("usage"));
describeClaimStoreConformance("SQLite", sqliteFactory("claims"));
describeGrantStoreConformance("SQLite", sqliteFactory("grants"));
describeAuditSinkConformance("SQLite", sqliteFactory("audit"));
