import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Redis } from "ioredis";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { expectRefusal, scratch, tessera } from "./support/cli.js";

/**
 * `grants list`, `revoke` and `derive --store` work on what a store holds. Before, each opened
 * the store as a writer, which makes one where the URL names none: a mistyped schema got every
 * Tessera table and `grants list` answered "no grants in namespace team" (exit 0); a mistyped
 * SQLite path got a new database file; and `revoke` answered "no such grant", which reads as if
 * the real grant were gone. Now such a URL is refused `schema_unavailable`, nothing made, as
 * the reading commands refuse it; `grants add` still makes a store.
 */

const GRANT = {
  subject: "agent",
  capabilities: [
    { resource: { namespace: "messages", path: ["bob"] }, actions: ["send"], scope: "exact" },
  ],
};

function grantFile(): string {
  const file = join(scratch(), "grant.json");
  writeFileSync(file, JSON.stringify(GRANT));
  return file;
}

/** The three commands that need a store already there, against `store`. */
function commandsOn(store: string): string[][] {
  const file = grantFile();
  return [
    ["grants", "list", "--store", store, "--namespace", "team"],
    ["grants", "revoke", "--store", store, "--namespace", "team", "--id", "g-1"],
    [
      ...["grants", "derive", "--store", store, "--namespace", "team"],
      ...["--parent", "g-1", "--issuer", "agent", "--file", file],
    ],
  ];
}

async function keysUnder(redis: Redis, prefix: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = "0";
  do {
    const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1_000);
    cursor = next;
    found.push(...keys);
  } while (cursor !== "0");
  return found;
}

function expectRefusedAsNoStore(args: string[]): void {
  const run = tessera(...args);
  expectRefusal(run, "schema_unavailable");
  expect(run.stderr).toContain(`${args.slice(0, 2).join(" ")} works on an existing store`);
}

describe("grants commands on a store URL that names no store", () => {
  it("SQLite: refused, and no database file is made; once grants add made one, listed", () => {
    const path = join(scratch(), "typo.db");
    for (const args of commandsOn(`sqlite:${path}`)) {
      expectRefusedAsNoStore(args);
      expect(existsSync(path)).toBe(false);
    }
    const add = tessera(
      ...["grants", "add", "--store", `sqlite:${path}`, "--file", grantFile()],
      ...["--namespace", "team", "--issuer", "host", "--json"],
    );
    expect(add.code).toBe(0);
    const id = (JSON.parse(add.stdout) as { id: string }).id;
    const listed = tessera("grants", "list", "--store", `sqlite:${path}`, "--namespace", "team");
    expect([listed.code, listed.stdout]).toEqual([0, expect.stringContaining(id)]);
  });

  const pgUrl = process.env.TESSERA_PG_URL;
  describe.skipIf(!pgUrl)("PostgreSQL (TESSERA_PG_URL)", () => {
    it("refused, and the schema is not created", async () => {
      const schema = `tessera_typo_${process.pid}_${Date.now()}`;
      const url = new URL(pgUrl as string);
      url.searchParams.set("schema", schema);
      const admin = new pg.Client({ connectionString: pgUrl });
      await admin.connect();
      try {
        for (const args of commandsOn(url.toString())) {
          expectRefusedAsNoStore(args);
          const { rows } = await admin.query(
            "SELECT 1 FROM information_schema.schemata WHERE schema_name = $1",
            [schema],
          );
          expect(rows).toEqual([]);
        }
      } finally {
        await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        await admin.end();
      }
    });
  });

  const redisUrl = process.env.TESSERA_REDIS_URL;
  describe.skipIf(!redisUrl)("Redis (TESSERA_REDIS_URL)", () => {
    it("refused, and nothing is written under the prefix", async () => {
      const prefix = `tessera-typo-${process.pid}-${Date.now()}:`;
      const url = new URL(redisUrl as string);
      url.searchParams.set("prefix", prefix);
      const redis = new Redis(redisUrl as string);
      try {
        for (const args of commandsOn(url.toString())) {
          expectRefusedAsNoStore(args);
          expect(await keysUnder(redis, prefix)).toEqual([]);
        }
      } finally {
        redis.disconnect();
      }
    });
  });
});
