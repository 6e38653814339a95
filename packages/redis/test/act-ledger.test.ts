import {
  type ActLedgerPorts,
  describeActLedgerConformance,
  type OpenedStore,
  type StoreFactory,
  serviceUrl,
} from "@tessera/testkit";
import { describe, it } from "vitest";
import {
  killOwnClients,
  openTestStores,
  type TestStores,
  waitUntilAnswering,
} from "./support/redis-test-stores.js";

/**
 * The ActLedger contract on Redis, through the bundle `openStores` gives (so `acts` is the
 * native ledger, one script per batch), with the outage the other Redis suites use: this
 * case's private proxy refuses and the server `CLIENT KILL`s its connection.
 */
const url = serviceUrl("TESSERA_REDIS_URL");

type Opened = OpenedStore<ActLedgerPorts> & { readonly opened: TestStores };

const factory: StoreFactory<ActLedgerPorts, Opened> = {
  open: async () => {
    const opened = await openTestStores(url as string);
    return { store: opened.stores, opened, close: opened.close };
  },
  outage: ({ opened, store }) => ({
    interrupt: async () => {
      opened.proxy.interrupt();
      await killOwnClients(url as string, opened.connectionName);
    },
    restore: async () => {
      opened.proxy.restore();
      await waitUntilAnswering(() => store.claims.get({ session: "probe", functionCallId: "p" }));
    },
  }),
};

if (url) {
  describeActLedgerConformance("redis", factory);
} else {
  describe("redis act ledger conformance", () => {
    it.skip("skipped: TESSERA_REDIS_URL is not set", () => {});
  });
}
