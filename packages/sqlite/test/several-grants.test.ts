/**
 * Several bounded grants on one resource, acts in flight at once, over SQLite (whose ledger
 * undoes a spend that lost): the testkit's race, in one process and across four, on a fresh
 * file each time. Before the ledger undid lost spends, 15 sends at once on five grants of
 * three uses delivered 6 and refused 9.
 */
import { openStores } from "@tessera/sqlite";
import { describeSeveralGrantsRace } from "@tessera/testkit";
import { freshFile } from "./helpers.js";

describeSeveralGrantsRace("SQLite", async () => {
  const file = freshFile();
  const url = `sqlite:${file.path}`;
  const stores = await openStores(url);
  return {
    stores,
    // The workers write back to back: SQLite's lock keeps no queue, so they wait long.
    processSpec: {
      module: "@tessera/sqlite",
      exportName: "openStores",
      arg: `${url}?busyTimeoutMs=60000`,
    },
    close: async () => {
      await stores.close();
      file.dispose();
    },
  };
});
