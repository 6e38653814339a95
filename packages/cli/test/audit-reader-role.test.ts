import { randomBytes } from "node:crypto";
import { openStores } from "@tessera/core";
import { auditEvent, serviceUrl } from "@tessera/testkit";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { removeRun } from "../../../test/support/scratch-stores.js";
import { tessera } from "./support/cli.js";

/**
 * `tessera audit list` and `verify` as an auditor runs them: with a PostgreSQL role that may
 * only read the store's tables. They opened the store as its writer does (migrations and a
 * self-test that writes), so such a role got `store_unavailable`; they open it to read now.
 */

const base = serviceUrl("TESSERA_PG_URL");
const run = `cli_${randomBytes(6).toString("hex")}`;
const role = `tessera_auditor_${randomBytes(4).toString("hex")}`;

async function admin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: base });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

describe("tessera audit, as a read-only PostgreSQL role", () => {
  afterAll(async () => {
    if (base === undefined) return;
    await removeRun("schema", base, run);
    await admin(`DROP ROLE IF EXISTS ${role}`);
  });

  it.runIf(base !== undefined)(
    "lists and verifies the trail; a schema with no store is named",
    async () => {
      const writer = new URL(base as string);
      writer.searchParams.set("schema", run);
      const stores = await openStores(writer.toString());
      for (let i = 0; i < 5; i++) await stores.audit.append(auditEvent(i));
      await stores.close();
      await admin(`CREATE ROLE ${role} LOGIN`);
      await admin(`GRANT USAGE ON SCHEMA "${run}" TO ${role}`);
      await admin(`GRANT SELECT ON ALL TABLES IN SCHEMA "${run}" TO ${role}`);

      const auditor = new URL(writer);
      auditor.username = role;
      auditor.password = "";
      const verify = tessera("audit", "verify", "--store", auditor.toString());
      expect(verify.stderr).toBe("");
      expect(verify.code).toBe(0);
      expect(verify.stdout).toContain("intact: 5 events");
      const list = tessera("audit", "list", "--store", auditor.toString());
      expect(list.code).toBe(0);
      expect(list.stdout.trimEnd().split("\n")).toHaveLength(5);

      const elsewhere = new URL(auditor);
      elsewhere.searchParams.set("schema", `${run}_absent`);
      const absent = tessera("audit", "list", "--store", elsewhere.toString());
      expect(absent.code).toBe(2);
      expect(absent.stderr).toContain("schema_unavailable");
    },
  );
});
