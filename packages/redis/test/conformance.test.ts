import {
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
import type { RedisStores } from "../src/index.js";
import {
  killOwnClients,
  openTestStores,
  type TestStores,
  waitUntilAnswering,
} from "./support/redis-test-stores.js";

/**
 * The shared conformance suites against Redis: every port, a fresh key prefix per case,
 * child processes opening the same prefix directly, and an outage that cuts this case's own
 * connection (its private proxy refuses, and the server `CLIENT KILL`s it) while the server
 * keeps serving everyone else. `restore` waits until the client has reconnected by itself.
 */
const url = serviceUrl("TESSERA_REDIS_URL");

type Port = keyof Omit<RedisStores, "close" | "acts">;

const PROBES: { [P in Port]: (store: RedisStores[P]) => Promise<unknown> } = {
  usage: (store) => store.getUsage("probe", "probe"),
  claims: (store) => store.get({ session: "probe", functionCallId: "probe" }),
  grants: (store) => store.listNamespace("probe"),
  audit: (store) => store.read({ callId: "probe" }),
};

type Opened<P extends Port> = OpenedStore<RedisStores[P]> & { readonly opened: TestStores };

function factory<P extends Port>(port: P): StoreFactory<RedisStores[P], Opened<P>> {
  return {
    open: async () => {
      const opened = await openTestStores(url as string);
      return { store: opened.stores[port] as RedisStores[P], opened, close: opened.close };
    },
    processSpec: ({ opened }) => ({
      module: "@tessera/redis",
      exportName: "openStores",
      arg: opened.directUrl,
      pick: port,
    }),
    outage: ({ opened, store }) => ({
      interrupt: async () => {
        opened.proxy.interrupt();
        await killOwnClients(url as string, opened.connectionName);
      },
      restore: async () => {
        opened.proxy.restore();
        await waitUntilAnswering(() => PROBES[port](store));
      },
    }),
  };
}

if (url) {
  describeUsageStoreConformance("redis", factory("usage"));
  describeClaimStoreConformance("redis", factory("claims"));
  describeGateWorkersConformance("redis", factory("claims"));
  describeGrantStoreConformance("redis", factory("grants"));
  describeAuditSinkConformance("redis", factory("audit"));
} else {
  describe("redis conformance", () => {
    it.skip("skipped: TESSERA_REDIS_URL is not set", () => {});
  });
}
