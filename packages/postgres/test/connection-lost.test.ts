import { serviceUrl } from "@tessera/testkit";
import { afterAll, describe, expect, it } from "vitest";
import { parsePostgresUrl } from "../src/config.js";
import { Database } from "../src/database.js";
import { admin, codeOf, dropSchema, freshSchema, withParams } from "./support/pg-test-stores.js";

/**
 * A backend that ends while a transaction holds its connection between two statements. The
 * server then sends its FATAL with no query of ours in flight, and the pg client emits
 * 'error': unheard, that killed the whole process (found by `kill -9` of PostgreSQL under a
 * real `tessera serve`: the audit sink's transaction was between statements). Now the
 * transaction fails with its `*_unavailable` code and the next one runs on a fresh connection.
 */
const url = serviceUrl("TESSERA_PG_URL");

describe.skipIf(url === undefined)("a PostgreSQL connection lost mid-transaction", () => {
  const schema = freshSchema();
  const db = new Database(parsePostgresUrl(withParams(url ?? "", { schema })));

  afterAll(async () => {
    await db.close();
    await dropSchema(url as string, schema);
  });

  it("fails the transaction as unavailable and keeps the process alive", async () => {
    // What would have ended a process outside the test runner.
    const uncaught: unknown[] = [];
    const record = (error: unknown) => uncaught.push(error);
    process.on("uncaughtException", record);
    const failed = await db
      .transaction("audit_unavailable", async (client) => {
        const { rows } = await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
        await admin(url as string, "SELECT pg_terminate_backend($1)", [rows[0]?.pid]);
        // No statement in flight while the server's FATAL arrives.
        await new Promise((resolve) => setTimeout(resolve, 300));
        await client.query("SELECT 1");
      })
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    process.off("uncaughtException", record);
    expect(uncaught).toEqual([]);
    expect(codeOf(failed)).toBe("audit_unavailable");
    const again = await db.transaction("audit_unavailable", async (client) => {
      return (await client.query<{ one: number }>("SELECT 1 AS one")).rows[0]?.one;
    });
    expect(again).toBe(1);
  });
});
