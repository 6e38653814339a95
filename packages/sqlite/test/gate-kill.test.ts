/**
 * kill -9 of A2UI gate workers sharing one SQLite file, many rounds (the testkit's SIGKILL
 * suite): with receipts written after the reply, nothing runs twice and no receipt lies.
 */
import type { SqliteStores } from "@tessera/sqlite";
import { describeGateKillConformance, type StoreFactory } from "@tessera/testkit";
import { type OpenedSqlite, openFresh } from "./helpers.js";

const factory: StoreFactory<
  SqliteStores["claims"],
  OpenedSqlite & { store: SqliteStores["claims"] }
> = {
  open: async () => {
    // The default busy timeout: this process reads while the workers write.
    const opened = await openFresh("busyTimeoutMs=5000");
    return { ...opened, store: opened.stores.claims };
  },
  processSpec: (opened) => ({
    module: "@tessera/sqlite",
    exportName: "openStores",
    arg: opened.url,
    pick: "claims",
  }),
};

describeGateKillConformance("SQLite", factory);
