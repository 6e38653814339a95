import { fileURLToPath } from "node:url";
import { serviceUrl } from "@tessera/testkit";
import { afterEach } from "vitest";
import { describeGateWorkersSharing } from "../../../test/support/gate-workers-suite.js";
import { deletePrefix, freshPrefix, withParams } from "./support/redis-test-stores.js";

const url = serviceUrl("TESSERA_REDIS_URL");
const prefixes: string[] = [];
afterEach(async () => {
  for (const prefix of prefixes.splice(0)) await deletePrefix(url as string, prefix);
});

describeGateWorkersSharing({
  name: "Redis",
  storeModule: fileURLToPath(new URL("../dist/index.js", import.meta.url)),
  freshUrl:
    url === undefined
      ? undefined
      : () => {
          const prefix = freshPrefix();
          prefixes.push(prefix);
          return withParams(url, { prefix });
        },
});
