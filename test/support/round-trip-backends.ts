import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  countPostgresStatements,
  countRedisCommands,
  countSqliteCommits,
  type DriverCounter,
  serviceUrl,
} from "@tessera/testkit";
import BetterSqlite3 from "better-sqlite3";
import { Redis } from "ioredis";
import pg from "pg";
import { removeRun } from "./scratch-stores.js";

/** One backend a round-trip test runs on, with the counter that watches its driver. */
export interface CountedBackend {
  readonly name: "sqlite" | "postgres" | "redis";
  /** Installs the driver counter: before the stores open (a Redis client binds its send). */
  readonly counter: () => DriverCounter;
  /** The store URL, or undefined when the service is not set up (a visible skip; CI fails). */
  readonly url: () => string | undefined;
  readonly cleanup: () => Promise<void>;
}

/**
 * SQLite in a scratch folder, and PostgreSQL and Redis under the run name `run` (a schema, a
 * key prefix: `serve_…` or `mcp_…`, names the scratch-store cleanup accepts), each with its
 * driver counter: the backends every "round trips before the reply" test counts on.
 */
export function countedBackends(run: string): CountedBackend[] {
  const dir = mkdtempSync(join(tmpdir(), `${run}-`));
  return [
    {
      name: "sqlite",
      counter: () => countSqliteCommits(BetterSqlite3),
      url: () => `sqlite:${join(dir, "t.db")}`,
      cleanup: async () => rmSync(dir, { recursive: true, force: true }),
    },
    {
      name: "postgres",
      counter: () => countPostgresStatements(pg.Client),
      url: () => {
        const base = serviceUrl("TESSERA_PG_URL");
        return base === undefined ? undefined : `${base}?schema=${run}`;
      },
      cleanup: async () => {
        const base = process.env.TESSERA_PG_URL;
        if (base) await removeRun("schema", base, run);
      },
    },
    {
      name: "redis",
      counter: () => countRedisCommands(Redis),
      url: () => {
        const base = serviceUrl("TESSERA_REDIS_URL");
        return base === undefined ? undefined : `${base}?prefix=${run}:`;
      },
      cleanup: async () => {
        const base = process.env.TESSERA_REDIS_URL;
        if (base) await removeRun("prefix", base, run);
      },
    },
  ];
}
