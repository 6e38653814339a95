import { describeStoreBundleConformance, serviceUrl } from "@tessera/testkit";
import { describe, it } from "vitest";
import * as backend from "../src/index.js";
import { deletePrefix, freshPrefix, withParams } from "./support/redis-test-stores.js";

/** The bundle contract every backend shares, against Redis, a fresh key prefix per case. */
const url = serviceUrl("TESSERA_REDIS_URL");

if (url) {
  describeStoreBundleConformance("redis", {
    backend,
    fresh: async () => {
      const prefix = freshPrefix();
      return {
        url: withParams(url, { prefix }),
        remove: () => deletePrefix(url, prefix),
      };
    },
    // Port 1: nothing listens there. The password must never reach a message.
    unreachableUrl: "redis://tessera:not-in-messages@127.0.0.1:1?connectTimeoutMs=2000",
  });
} else {
  describe("redis bundle", () => {
    it.skip("skipped: TESSERA_REDIS_URL is not set", () => {});
  });
}
