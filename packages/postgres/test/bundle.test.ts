import { describeStoreBundleConformance, serviceUrl } from "@tessera/testkit";
import { describe, it } from "vitest";
import * as backend from "../src/index.js";
import { dropSchema, freshSchema, withParams } from "./support/pg-test-stores.js";

/** The bundle contract every backend shares, against PostgreSQL, a fresh schema per case. */
const url = serviceUrl("TESSERA_PG_URL");

if (url) {
  describeStoreBundleConformance("postgres", {
    backend,
    fresh: async () => {
      const schema = freshSchema();
      return {
        url: withParams(url, { schema }),
        remove: () => dropSchema(url, schema),
      };
    },
    // Port 1: nothing listens there. The password must never reach a message.
    unreachableUrl: "postgres://tessera:not-in-messages@127.0.0.1:1/db?connectTimeoutMs=2000",
  });
} else {
  describe("postgres bundle", () => {
    it.skip("skipped: TESSERA_PG_URL is not set", () => {});
  });
}
