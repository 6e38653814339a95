import { randomUUID } from "node:crypto";
import { createRequire } from "node:module";
import { join } from "node:path";
import { type AuditEvent, openStores } from "@tessera/core";
import { serviceUrl } from "@tessera/testkit";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { removeRun } from "../../../test/support/scratch-stores.js";
import { scratch, tessera } from "./support/cli.js";

/**
 * `tessera audit verify` on a real store whose audit row was replaced, as someone holding the
 * database would (append-only triggers dropped first), by JSON `null` or by text that is not
 * JSON: a break named `unreadable` at its position, exit 3 — it was exit 1 with a TypeError
 * or SyntaxError and a stack.
 */

// The SQLite driver as @tessera/sqlite resolves it: the CLI does not depend on it directly.
const sqliteEntry = createRequire(import.meta.url).resolve("@tessera/sqlite");
const Database = createRequire(sqliteEntry)("better-sqlite3") as new (
  path: string,
) => {
  exec(sql: string): void;
  pragma(sql: string): unknown;
  prepare(sql: string): { run(...values: unknown[]): unknown };
  close(): void;
};

const event = (i: number): AuditEvent => ({
  at: "2026-11-30T00:00:00.000Z",
  source: "kernel",
  outcome: "allowed",
  code: null,
  reason: "allowed",
  traceId: "t",
  callId: `c${i}`,
  namespaceId: "team",
});

const CORRUPTIONS = [
  ["JSON null", "null"],
  ["text that is not JSON", "{not json"],
] as const;

function expectUnreadable(url: string): void {
  const run = tessera("audit", "verify", "--store", url);
  expect(run.stderr).not.toMatch(/TypeError|SyntaxError|\n\s+at /);
  expect(run.code).toBe(3);
  expect(run.stdout).toContain("broken: unreadable event at index 2");
  const json = tessera("audit", "verify", "--store", url, "--json");
  expect(json.code).toBe(3);
  expect(JSON.parse(json.stdout)).toMatchObject({
    ok: false,
    intact: false,
    break: { kind: "unreadable", index: 2 },
  });
}

describe("tessera audit verify on a corrupted SQLite row", () => {
  it.each(CORRUPTIONS)("a row replaced by %s: unreadable at index 2, exit 3", async (_t, text) => {
    const path = join(scratch(), "tessera.db");
    const stores = await openStores(`sqlite:${path}`);
    for (let i = 0; i < 5; i++) await stores.audit.append(event(i));
    await stores.close();
    expect(tessera("audit", "verify", "--store", `sqlite:${path}`).code).toBe(0);

    const raw = new Database(path);
    raw.exec("DROP TRIGGER tessera_audit_no_update");
    raw.pragma("ignore_check_constraints = ON");
    raw
      .prepare(
        "UPDATE tessera_audit SET event = ? WHERE seq = (SELECT seq FROM tessera_audit ORDER BY seq LIMIT 1 OFFSET 2)",
      )
      .run(text);
    raw.close();
    expectUnreadable(`sqlite:${path}`);
  });
});

describe("tessera audit verify on a corrupted PostgreSQL row", () => {
  const base = serviceUrl("TESSERA_PG_URL");
  const runs: string[] = [];
  afterAll(async () => {
    if (base !== undefined) for (const run of runs) await removeRun("schema", base, run);
  });
  it.runIf(base !== undefined).each(CORRUPTIONS)(
    "a row replaced by %s: unreadable at index 2, exit 3",
    async (_t, text) => {
      const run = `cli_${randomUUID().replaceAll("-", "").slice(0, 12)}`;
      runs.push(run);
      const url = new URL(base as string);
      url.searchParams.set("schema", run);
      const stores = await openStores(url.toString());
      for (let i = 0; i < 5; i++) await stores.audit.append(event(i));
      await stores.close();
      expect(tessera("audit", "verify", "--store", url.toString()).code).toBe(0);

      const client = new pg.Client({ connectionString: base });
      await client.connect();
      try {
        const audit = `"${run}".audit`;
        await client.query(`DROP TRIGGER audit_no_change ON ${audit}`);
        await client.query(
          `UPDATE ${audit} SET event = $1 WHERE seq = (SELECT seq FROM ${audit} ORDER BY seq LIMIT 1 OFFSET 2)`,
          [text],
        );
      } finally {
        await client.end();
      }
      expectUnreadable(url.toString());
    },
  );
});
