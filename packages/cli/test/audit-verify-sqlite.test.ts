import { createRequire } from "node:module";
import { join } from "node:path";
import type { AuditEvent } from "@tessera/core";
import { openStores } from "@tessera/sqlite";
import { describe, expect, it } from "vitest";
import { scratch, tessera } from "./support/cli.js";

/**
 * `tessera audit verify --store sqlite:…` on a real SQLite file, with a row deleted as someone
 * holding the file would (append-only triggers dropped first). The backends' own tamper tests
 * do all four tamperings; this one checks the command reads a store and reports it.
 */

// The SQLite driver as @tessera/sqlite resolves it: the CLI does not depend on it directly.
const sqliteEntry = createRequire(import.meta.url).resolve("@tessera/sqlite");
const Database = createRequire(sqliteEntry)("better-sqlite3") as new (
  path: string,
) => { exec(sql: string): void; close(): void };

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

describe("tessera audit verify on a SQLite store", () => {
  it("exits 0 on the intact store, 3 naming the gap once a row is deleted", async () => {
    const path = join(scratch(), "tessera.db");
    const stores = await openStores(`sqlite:${path}`);
    for (let i = 0; i < 5; i++) await stores.audit.append(event(i));
    await stores.close();

    const intact = tessera("audit", "verify", "--store", `sqlite:${path}`);
    expect(intact.code).toBe(0);
    expect(intact.stdout).toContain('stream "team": 5 events, verified to seq 5');

    const raw = new Database(path);
    raw.exec("DROP TRIGGER tessera_audit_no_delete");
    raw.exec(
      "DELETE FROM tessera_audit WHERE seq = (SELECT seq FROM tessera_audit ORDER BY seq LIMIT 1 OFFSET 2)",
    );
    raw.close();
    const broken = tessera("audit", "verify", "--store", `sqlite:${path}`);
    expect(broken.code).toBe(3);
    expect(broken.stdout).toContain(
      'broken: deleted event in stream "team" at index 2 (seq 4, expected seq 3)',
    );
  });
});
