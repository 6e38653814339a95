/**
 * `pg` gives what the connection string says precedence over the settings passed beside it, so
 * a URL parameter could undo what Tessera sets on each connection: a reader's read-only
 * transactions (`options=…` replaced them) or the server-side statement timeout
 * (`statement_timeout=0`). Checked on a connection of the server itself.
 */
import { serviceUrl } from "@tessera/testkit";
import { describe, expect, it } from "vitest";
import { parsePostgresUrl } from "../src/config.js";
import { Database } from "../src/database.js";
import { freshSchema, withParams } from "./support/pg-test-stores.js";

const url = serviceUrl("TESSERA_PG_URL");

if (url) {
  describe("PostgreSQL URL parameters of the driver", () => {
    it("a reader's connections stay read-only whatever options the URL carries", async () => {
      const config = parsePostgresUrl(
        withParams(url, { schema: freshSchema(), options: "-c lock_timeout=1000" }),
      );
      const db = new Database(config, { readOnly: true });
      try {
        const show = async (name: string) =>
          (await db.query<Record<string, string>>("audit_unavailable", `SHOW ${name}`)).rows[0]?.[
            name
          ];
        expect(await show("default_transaction_read_only")).toBe("on");
        // The URL's own options still apply.
        expect(await show("lock_timeout")).toBe("1s");
      } finally {
        await db.close();
      }
    });

    it.each(["statement_timeout=0", "query_timeout=0", "binary=true", "replication=database"])(
      "%s is refused with invalid_config instead of overriding Tessera's setting",
      (param) => {
        expect(() => parsePostgresUrl(`${url}${url.includes("?") ? "&" : "?"}${param}`)).toThrow(
          expect.objectContaining({ code: "invalid_config" }),
        );
      },
    );
  });
} else {
  describe("PostgreSQL URL parameters of the driver", () => {
    it.skip("skipped: TESSERA_PG_URL is not set", () => {});
  });
}
