/**
 * Every conformance suite against the SQLite backend, with 8 real OS processes sharing the
 * file and a write-lock outage held by another connection.
 */
import {
  describeAuditSinkConformance,
  describeClaimStoreConformance,
  describeGrantStoreConformance,
  describeUsageStoreConformance,
  type ProcessSpec,
} from "@tessera/testkit";
import { type OpenedSqlite, openFresh, writeLockOutage } from "./helpers.js";

function spec(pick: "usage" | "claims" | "grants" | "audit") {
  return (opened: OpenedSqlite): ProcessSpec => ({
    module: "@tessera/sqlite",
    exportName: "openStores",
    arg: opened.url,
    pick,
  });
}

const outage = (opened: OpenedSqlite) => writeLockOutage(opened.url);

describeUsageStoreConformance("SQLite", {
  open: async () => {
    const opened = await openFresh();
    return { ...opened, store: opened.stores.usage };
  },
  processSpec: spec("usage"),
  outage,
});

describeClaimStoreConformance("SQLite", {
  open: async () => {
    const opened = await openFresh();
    return { ...opened, store: opened.stores.claims };
  },
  processSpec: spec("claims"),
  outage,
});

describeGrantStoreConformance("SQLite", {
  open: async () => {
    const opened = await openFresh();
    return { ...opened, store: opened.stores.grants };
  },
  processSpec: spec("grants"),
  outage,
});

describeAuditSinkConformance("SQLite", {
  open: async () => {
    const opened = await openFresh();
    return { ...opened, store: opened.stores.audit };
  },
  processSpec: spec("audit"),
  outage,
});
