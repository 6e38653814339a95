/**
 * kill -9 of A2UI gate workers sharing one PostgreSQL schema, many rounds (the testkit's
 * SIGKILL suite): with receipts written after the reply, nothing runs twice and no receipt
 * lies. A killed worker's open transaction is rolled back by the server.
 */
import {
  describeGateKillConformance,
  type OpenedStore,
  type StoreFactory,
  serviceUrl,
} from "@tessera/testkit";
import { describe, it } from "vitest";
import type { PostgresStores } from "../src/index.js";
import { openTestStores, type TestStores } from "./support/pg-test-stores.js";

const url = serviceUrl("TESSERA_PG_URL");

type Opened = OpenedStore<PostgresStores["claims"]> & { readonly opened: TestStores };

const factory: StoreFactory<PostgresStores["claims"], Opened> = {
  open: async () => {
    const opened = await openTestStores(url as string);
    return { store: opened.stores.claims, opened, close: opened.close };
  },
  processSpec: ({ opened }) => ({
    module: "@tessera/postgres",
    exportName: "openStores",
    arg: opened.directUrl,
    pick: "claims",
  }),
};

if (url) {
  describeGateKillConformance("postgres", factory);
} else {
  describe("postgres gate kill -9", () => {
    it.skip("skipped: TESSERA_PG_URL is not set", () => {});
  });
}
