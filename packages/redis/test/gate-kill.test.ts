/**
 * kill -9 of A2UI gate workers sharing one Redis key prefix, many rounds (the testkit's
 * SIGKILL suite): with receipts written after the reply, nothing runs twice and no receipt
 * lies.
 */
import {
  describeGateKillConformance,
  type OpenedStore,
  type StoreFactory,
  serviceUrl,
} from "@tessera/testkit";
import { describe, it } from "vitest";
import type { RedisStores } from "../src/index.js";
import { openTestStores, type TestStores } from "./support/redis-test-stores.js";

const url = serviceUrl("TESSERA_REDIS_URL");

type Opened = OpenedStore<RedisStores["claims"]> & { readonly opened: TestStores };

const factory: StoreFactory<RedisStores["claims"], Opened> = {
  open: async () => {
    const opened = await openTestStores(url as string);
    return { store: opened.stores.claims, opened, close: opened.close };
  },
  processSpec: ({ opened }) => ({
    module: "@tessera/redis",
    exportName: "openStores",
    arg: opened.directUrl,
    pick: "claims",
  }),
};

if (url) {
  describeGateKillConformance("redis", factory);
} else {
  describe("redis gate kill -9", () => {
    it.skip("skipped: TESSERA_REDIS_URL is not set", () => {});
  });
}
