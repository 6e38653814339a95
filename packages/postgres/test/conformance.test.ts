import {
  describeActLedgerConformance,
  describeAuditSinkConformance,
  describeClaimStoreConformance,
  describeGateWorkersConformance,
  describeGrantStoreConformance,
  describeUsageStoreConformance,
  type OpenedStore,
  type StoreFactory,
  serviceUrl,
} from "@tessera/testkit";
import { describe, it } from "vitest";
import type { PostgresStores } from "../src/index.js";
import { openTestStores, type TestStores, terminateOwnBackends } from "./support/pg-test-stores.js";

/**
 * The shared conformance suites against PostgreSQL: every port, a fresh schema per case,
 * child processes opening the same schema directly, and an outage that cuts this case's own
 * connections (its private proxy refuses, and the server terminates its backends) while
 * the server keeps serving everyone else.
 */
const url = serviceUrl("TESSERA_PG_URL");

type Port = keyof Omit<PostgresStores, "close">;

type Opened<P extends Port> = OpenedStore<PostgresStores[P]> & { readonly opened: TestStores };

function factory<P extends Port>(port: P): StoreFactory<PostgresStores[P], Opened<P>> {
  return {
    open: async () => {
      const opened = await openTestStores(url as string);
      return { store: opened.stores[port] as PostgresStores[P], opened, close: opened.close };
    },
    processSpec: ({ opened }) => ({
      module: "@tessera/postgres",
      exportName: "openStores",
      arg: opened.directUrl,
      pick: port,
    }),
    outage: ({ opened }) => ({
      interrupt: async () => {
        opened.proxy.interrupt();
        await terminateOwnBackends(url as string, opened.applicationName);
      },
      restore: async () => opened.proxy.restore(),
    }),
  };
}

if (url) {
  describeUsageStoreConformance("postgres", factory("usage"));
  describeClaimStoreConformance("postgres", factory("claims"));
  describeGateWorkersConformance("postgres", factory("claims"));
  describeGrantStoreConformance("postgres", factory("grants"));
  describeAuditSinkConformance("postgres", factory("audit"));
  describeActLedgerConformance("postgres", {
    open: async () => {
      const opened = await openTestStores(url as string);
      return { store: opened.stores, opened, close: opened.close };
    },
    outage: ({ opened }) => ({
      interrupt: async () => {
        opened.proxy.interrupt();
        await terminateOwnBackends(url as string, opened.applicationName);
      },
      restore: async () => opened.proxy.restore(),
    }),
  });
} else {
  describe("postgres conformance", () => {
    it.skip("skipped: TESSERA_PG_URL is not set", () => {});
  });
}
