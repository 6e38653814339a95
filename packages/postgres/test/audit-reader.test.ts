/**
 * `openAuditReader` against a real server, as an auditor opens it: a role with `SELECT` on the
 * store's tables and nothing more reads and pages through the trail; the reader writes nothing
 * (no schema made where there was none, an append refused); a schema
 * without a store, or newer than this build, is `schema_unavailable`.
 */
import { randomBytes } from "node:crypto";
import { TesseraError } from "@tessera/core";
import { auditEvent, expectReadOnlyReader, serviceUrl } from "@tessera/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openAuditReader, SCHEMA_VERSION } from "../src/index.js";
import { admin, freshSchema, openTestStores, withParams } from "./support/pg-test-stores.js";

const url = serviceUrl("TESSERA_PG_URL");

if (url) {
  const sql = (text: string, values: unknown[] = []) => admin(url, text, values);
  const role = `tessera_auditor_${randomBytes(4).toString("hex")}`;
  const as = (schema: string) => {
    const reader = new URL(withParams(url, { schema }));
    reader.username = role;
    reader.password = "";
    return reader.toString();
  };

  describe("PostgreSQL openAuditReader", () => {
    beforeAll(() => sql(`CREATE ROLE ${role} LOGIN`));
    afterAll(() => sql(`DROP ROLE IF EXISTS ${role}`));

    it("reads the trail with SELECT alone, and writes nothing", async () => {
      const opened = await openTestStores(url);
      try {
        for (let i = 0; i < 7; i++) await opened.stores.audit.append(auditEvent(i));
        const whole = await opened.stores.audit.read();
        await sql(`GRANT USAGE ON SCHEMA "${opened.schema}" TO ${role}`);
        await sql(`GRANT SELECT ON ALL TABLES IN SCHEMA "${opened.schema}" TO ${role}`);
        const reader = await openAuditReader(as(opened.schema));
        try {
          await expectReadOnlyReader(reader, whole);
        } finally {
          await reader.close();
        }
        await sql(`REVOKE ALL ON ALL TABLES IN SCHEMA "${opened.schema}" FROM ${role}`);
        await sql(`REVOKE ALL ON SCHEMA "${opened.schema}" FROM ${role}`);
        expect(await opened.stores.audit.read()).toHaveLength(7);
      } finally {
        await opened.close();
      }
    });

    it("a schema with no store is schema_unavailable, and is not made", async () => {
      const schema = freshSchema();
      const error = await openAuditReader(withParams(url, { schema })).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(TesseraError);
      expect(error).toMatchObject({ code: "schema_unavailable" });
      const rows = await sql("SELECT 1 FROM pg_namespace WHERE nspname = $1", [schema]);
      expect(rows).toHaveLength(0);
    });

    it("a schema newer than this build is schema_unavailable", async () => {
      const opened = await openTestStores(url);
      try {
        await sql(`INSERT INTO "${opened.schema}".schema_version (version) VALUES ($1)`, [
          SCHEMA_VERSION + 1,
        ]);
        const error = await openAuditReader(withParams(url, { schema: opened.schema })).catch(
          (e: unknown) => e,
        );
        expect(error).toMatchObject({ code: "schema_unavailable" });
      } finally {
        await opened.close();
      }
    });
  });
} else {
  describe("PostgreSQL openAuditReader", () => {
    it.skip("skipped: TESSERA_PG_URL is not set", () => {});
  });
}
