import { fileURLToPath } from "node:url";
import { serviceUrl } from "@tessera/testkit";
import { afterEach } from "vitest";
import { describeGateWorkersSharing } from "../../../test/support/gate-workers-suite.js";
import { dropSchema, freshSchema, withParams } from "./support/pg-test-stores.js";

const url = serviceUrl("TESSERA_PG_URL");
const schemas: string[] = [];
afterEach(async () => {
  for (const schema of schemas.splice(0)) await dropSchema(url as string, schema);
});

describeGateWorkersSharing({
  name: "PostgreSQL",
  storeModule: fileURLToPath(new URL("../dist/index.js", import.meta.url)),
  freshUrl:
    url === undefined
      ? undefined
      : () => {
          const schema = freshSchema();
          schemas.push(schema);
          return withParams(url, { schema });
        },
});
