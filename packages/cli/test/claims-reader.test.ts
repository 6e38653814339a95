import { randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { openStores } from "@tessera/core";
import { SCHEMA_VERSION as PG_VERSION } from "@tessera/postgres";
import { LAYOUT_VERSION } from "@tessera/redis";
import { SCHEMA_VERSION as SQLITE_VERSION } from "@tessera/sqlite";
import { serviceUrl } from "@tessera/testkit";
import BetterSqlite3 from "better-sqlite3";
import { Redis } from "ioredis";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { removeRun } from "../../../test/support/scratch-stores.js";
import { expectRefusal, scratch, tessera, tesseraWith } from "./support/cli.js";

/**
 * `tessera claims --in-doubt --store` lists, and writes nothing. It opened the store as a
 * writer, which migrated a store an older release left (schema or layout version) in place,
 * under any instance of that release still running. It opens a claim reader now: an older
 * store is refused (`schema_unavailable`) and left at its version; `--upgrade` is the
 * operator's way to migrate it, as before.
 */
interface Backend {
  readonly name: string;
  readonly current: number;
  /** A store of this build's layout with one claim in doubt. */
  make(): Promise<string>;
  /** Puts the store back at the version before this build's, as the previous release left it. */
  makeOlder(url: string): Promise<void>;
  versionOf(url: string): Promise<number>;
}

const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

async function withInDoubt(url: string): Promise<string> {
  const stores = await openStores(url);
  try {
    await stores.claims.claim(
      { session: "s-1", functionCallId: "died-here" },
      { bodyHash: "h", claimedAt: Date.now() },
    );
  } finally {
    await stores.close();
  }
  return url;
}

const sqlite: Backend = {
  name: "SQLite",
  current: SQLITE_VERSION,
  make: () => withInDoubt(`sqlite:${join(scratch(), "tessera.db")}`),
  async makeOlder(url) {
    const raw = new BetterSqlite3(url.slice("sqlite:".length));
    try {
      // Version 4 added the answer column: without it and its row, the file is version 3's.
      raw.exec(`DELETE FROM tessera_schema_version WHERE version = ${SQLITE_VERSION};
        ALTER TABLE tessera_claims DROP COLUMN answer;`);
    } finally {
      raw.close();
    }
  },
  async versionOf(url) {
    const raw = new BetterSqlite3(url.slice("sqlite:".length), { readonly: true });
    try {
      return (
        raw.prepare("SELECT max(version) AS v FROM tessera_schema_version").get() as { v: number }
      ).v;
    } finally {
      raw.close();
    }
  },
};

async function pgQuery<Row extends pg.QueryResultRow>(base: string, text: string) {
  const client = new pg.Client({ connectionString: base });
  await client.connect();
  try {
    return (await client.query<Row>(text)).rows;
  } finally {
    await client.end();
  }
}

function postgresBackend(base: string): Backend {
  const schemaOf = (url: string) => new URL(url).searchParams.get("schema") as string;
  return {
    name: "PostgreSQL",
    current: PG_VERSION,
    async make() {
      const run = `cli_${randomBytes(6).toString("hex")}`;
      cleanups.push(() => removeRun("schema", base, run));
      const url = new URL(base);
      url.searchParams.set("schema", run);
      return withInDoubt(url.href);
    },
    async makeOlder(url) {
      // The last migration replaces functions only: without its row, the schema reads as the
      // previous version's, and a writer's open applies it again.
      await pgQuery(
        base,
        `DELETE FROM "${schemaOf(url)}".schema_version WHERE version = ${PG_VERSION}`,
      );
    },
    async versionOf(url) {
      const rows = await pgQuery<{ v: number }>(
        base,
        `SELECT max(version) AS v FROM "${schemaOf(url)}".schema_version`,
      );
      return rows[0]?.v as number;
    },
  };
}

function redisBackend(base: string): Backend {
  const prefixOf = (url: string) => new URL(url).searchParams.get("prefix") as string;
  const withRedis = async <T>(work: (redis: Redis) => Promise<T>) => {
    const redis = new Redis(base, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await redis.connect();
    try {
      return await work(redis);
    } finally {
      redis.disconnect();
    }
  };
  return {
    name: "Redis",
    current: LAYOUT_VERSION,
    async make() {
      const run = `cli_${randomBytes(6).toString("hex")}`;
      cleanups.push(() => removeRun("prefix", base, run));
      const url = new URL(base);
      url.searchParams.set("prefix", `${run}:`);
      return withInDoubt(url.href);
    },
    async makeOlder(url) {
      // Layout 4 rewrote nothing (a claim's answer is a line a version-3 claim lacks).
      await withRedis((redis) =>
        redis.set(`${prefixOf(url)}layout-version`, String(LAYOUT_VERSION - 1)),
      );
    },
    versionOf: (url) =>
      withRedis(async (redis) => Number(await redis.get(`${prefixOf(url)}layout-version`))),
  };
}

const postgres = serviceUrl("TESSERA_PG_URL");
const redis = serviceUrl("TESSERA_REDIS_URL");
const backends: { backend: Backend | undefined; name: string }[] = [
  { name: "SQLite", backend: sqlite },
  { name: "PostgreSQL", backend: postgres ? postgresBackend(postgres) : undefined },
  { name: "Redis", backend: redis ? redisBackend(redis) : undefined },
];

const listed = (run: ReturnType<typeof tessera>) =>
  (JSON.parse(run.stdout) as { functionCallId: string }[]).map((claim) => claim.functionCallId);

describe.each(backends)("claims --in-doubt --store, $name", ({ backend }) => {
  const maybe = it.runIf(backend !== undefined);
  const b = backend as Backend;

  maybe("a store of this build is listed through the reader, its version unchanged", async () => {
    const url = await b.make();
    const run = tessera("claims", "--in-doubt", "--store", url, "--json");
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(listed(run)).toEqual(["died-here"]);
    expect(await b.versionOf(url)).toBe(b.current);
  });

  maybe("an older store is refused with schema_unavailable and left at its version", async () => {
    const url = await b.make();
    await b.makeOlder(url);
    const older = b.current - 1;
    expect(await b.versionOf(url)).toBe(older);
    const run = tessera("claims", "--in-doubt", "--store", url);
    expectRefusal(run, "schema_unavailable");
    expect(run.stderr).toContain(`at version ${older}, older than this build (${b.current})`);
    expect(run.stderr).toContain("--upgrade");
    expect(run.stdout).not.toContain("claim(s) in doubt");
    // Nothing was migrated: an old release's instance still running keeps its layout.
    expect(await b.versionOf(url)).toBe(older);
  });

  maybe("with --upgrade, an older store is migrated and listed", async () => {
    const url = await b.make();
    await b.makeOlder(url);
    const run = tessera("claims", "--in-doubt", "--store", url, "--upgrade", "--json");
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(listed(run)).toEqual(["died-here"]);
    expect(await b.versionOf(url)).toBe(b.current);
  });
});

describe("claims --in-doubt --data, whose claims are in its store", () => {
  it("refuses an older store and leaves it; --upgrade migrates and lists it", async () => {
    const data = join(scratch(), "data");
    expect(tesseraWith({}, "init", data, "--json").code).toBe(0);
    // A service told to keep its claims in the store: the config names no claim directory.
    const config = join(data, "tessera.json");
    const { claims: _dir, ...rest } = JSON.parse(readFileSync(config, "utf8")) as {
      claims?: string;
    };
    writeFileSync(config, JSON.stringify(rest));
    const url = await withInDoubt(`sqlite:${join(data, "tessera.db")}`);
    await sqlite.makeOlder(url);
    const refused = tesseraWith({}, "claims", "--in-doubt", "--data", data);
    expectRefusal(refused, "schema_unavailable");
    expect(await sqlite.versionOf(url)).toBe(SQLITE_VERSION - 1);
    const upgraded = tesseraWith({}, "claims", "--in-doubt", "--data", data, "--upgrade", "--json");
    expect(upgraded.code).toBe(0);
    expect(listed(upgraded)).toEqual(["died-here"]);
    expect(await sqlite.versionOf(url)).toBe(SQLITE_VERSION);
  });
});

describe("claims --in-doubt --upgrade where there is nothing to upgrade", () => {
  it("a claim directory is refused with invalid_usage", () => {
    const run = tessera("claims", "--in-doubt", "--dir", scratch(), "--upgrade");
    expectRefusal(run, "invalid_usage");
    expect(run.stderr).toContain("--upgrade goes with --store or --data");
  });

  it("the help says what --upgrade does", () => {
    const run = tessera("claims", "--help");
    expect(run.stdout).toMatch(/--upgrade\s+with --store or --data: open the store as a writer/);
  });
});
