/**
 * Several bounded grants on one resource, acts in flight at once, on PostgreSQL, whose
 * `record_acts` (schema version 10) undoes an act whose spend lost: the testkit's race, in one
 * process and across four, each on a fresh schema. The batch cases (a claim passed on through
 * undone acts within one statement) are in lost-spend-batch.test.ts.
 */
import { describeSeveralGrantsRace, serviceUrl } from "@tessera/testkit";
import { openTestStores } from "./support/pg-test-stores.js";

const url = serviceUrl("TESSERA_PG_URL");

describeSeveralGrantsRace(
  "PostgreSQL",
  url === undefined
    ? undefined
    : async () => {
        const opened = await openTestStores(url);
        return {
          stores: opened.stores,
          processSpec: {
            module: "@tessera/postgres",
            exportName: "openStores",
            arg: opened.directUrl,
          },
          close: opened.close,
        };
      },
);
