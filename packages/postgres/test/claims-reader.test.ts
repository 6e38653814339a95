/**
 * `openClaimReader` against a real server, as an operator listing in-doubt calls opens it: a
 * role with `SELECT` on the store's tables and nothing more lists and reads claims over
 * read-only transactions; the reader hands out no write; a schema older than this build is
 * `schema_unavailable` and left at its version (a writer's open is what migrates it).
 */
import { randomBytes } from "node:crypto";
import { serviceUrl } from "@tessera/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parsePostgresUrl } from "../src/config.js";
import { Database } from "../src/database.js";
import { openClaimReader, openStores, SCHEMA_VERSION } from "../src/index.js";
import { migrate } from "../src/migrations.js";
import { admin, dropSchema, freshSchema, withParams } from "./support/pg-test-stores.js";

const url = serviceUrl("TESSERA_PG_URL");
const suite = url ? describe : describe.skip;

suite("PostgreSQL openClaimReader", () => {
  const base = url as string;
  const sql = (text: string, values: unknown[] = []) => admin(base, text, values);
  const role = `tessera_lister_${randomBytes(4).toString("hex")}`;
  const schemas: string[] = [];
  const fresh = () => {
    const schema = freshSchema();
    schemas.push(schema);
    return schema;
  };
  const versionOf = async (schema: string) =>
    (
      await admin<{ v: number }>(base, `SELECT max(version) AS v FROM "${schema}".schema_version`)
    )[0]?.v;
  beforeAll(() => sql(`CREATE ROLE ${role} LOGIN`));
  afterAll(async () => {
    for (const schema of schemas) await dropSchema(base, schema);
    await sql(`DROP ROLE IF EXISTS ${role}`);
  });

  it("lists and reads claims with SELECT alone, handing out no write", async () => {
    const schema = fresh();
    const stores = await openStores(withParams(base, { schema }));
    try {
      await stores.claims.claim({ session: "s", functionCallId: "open" }, claimed(1));
      await stores.claims.claim({ session: "s", functionCallId: "done" }, claimed(2));
      await stores.claims.settle(
        { session: "s", functionCallId: "done" },
        { status: "dispatched", settledAt: 3 },
      );
    } finally {
      await stores.close();
    }
    await sql(`GRANT USAGE ON SCHEMA "${schema}" TO ${role}`);
    await sql(`GRANT SELECT ON ALL TABLES IN SCHEMA "${schema}" TO ${role}`);
    const as = new URL(withParams(base, { schema }));
    as.username = role;
    as.password = "";
    const reader = await openClaimReader(as.toString());
    try {
      expect((await reader.listInDoubt()).map((c) => c.functionCallId)).toEqual(["open"]);
      expect((await reader.listInDoubt("s")).map((c) => c.functionCallId)).toEqual(["open"]);
      expect((await reader.get({ session: "s", functionCallId: "done" }))?.receipt).toEqual({
        status: "dispatched",
        settledAt: 3,
      });
      for (const write of ["claim", "settle", "endSession"]) {
        expect(reader).not.toHaveProperty(write);
      }
    } finally {
      await reader.close();
    }
  });

  it("a schema older than this build is schema_unavailable and stays at its version", async () => {
    const schema = fresh();
    const older = SCHEMA_VERSION - 1;
    const db = new Database(parsePostgresUrl(withParams(base, { schema })));
    try {
      await migrate(db, older);
    } finally {
      await db.close();
    }
    const error = await openClaimReader(withParams(base, { schema })).catch((e: unknown) => e);
    expect(error).toMatchObject({
      code: "schema_unavailable",
      message: expect.stringContaining(
        `at version ${older}, older than this build (${SCHEMA_VERSION}): listing its claims would need it upgraded`,
      ),
    });
    expect(await versionOf(schema)).toBe(older);
  });

  it("a schema with no store is schema_unavailable, and is not made", async () => {
    const schema = fresh();
    const error = await openClaimReader(withParams(base, { schema })).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "schema_unavailable" });
    expect(await sql("SELECT 1 FROM pg_namespace WHERE nspname = $1", [schema])).toHaveLength(0);
  });
});

function claimed(claimedAt: number) {
  return { bodyHash: "h", claimedAt };
}
