import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { expectClosedStoresRefuse, serviceUrl } from "@tessera/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { openClaimStore, openStores, SCHEMA_VERSION } from "../src/index.js";
import {
  admin,
  codeOf,
  dropSchema,
  freshSchema,
  openTestStores,
  type TestStores,
  terminateOwnBackends,
  withParams,
} from "./support/pg-test-stores.js";

/**
 * PostgreSQL-specific behaviour the shared suites do not reach: migrations racing across OS
 * processes, the self-test refusing a sabotaged schema, connections killed by the server,
 * SQL-shaped keys, and the store's own refusals.
 */
const url = serviceUrl("TESSERA_PG_URL");
const suite = url ? describe : describe.skip;
const run = promisify(execFile);
const distIndex = fileURLToPath(new URL("../dist/index.js", import.meta.url));

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

async function opened(): Promise<TestStores> {
  const stores = await openTestStores(url as string);
  cleanups.push(() => stores.close());
  return stores;
}

function schemaToDrop(): string {
  const schema = freshSchema();
  cleanups.push(() => dropSchema(url as string, schema));
  return schema;
}

suite("postgres backend", () => {
  it("migrates once when 4 OS processes open a fresh schema at the same instant", async () => {
    const schema = schemaToDrop();
    const target = withParams(url as string, { schema });
    const startAt = Date.now() + 1_500;
    // Each child waits for the same instant, then opens: they race on CREATE SCHEMA.
    const child = `
      const { openStores } = await import(${JSON.stringify(distIndex)});
      await new Promise((r) => setTimeout(r, ${startAt} - Date.now()));
      const stores = await openStores(${JSON.stringify(target)});
      const claimed = await stores.claims.claim(
        { session: "race", functionCallId: String(process.pid) },
        { bodyHash: "h", claimedAt: Date.now() },
      );
      await stores.close();
      process.stdout.write(claimed.status);`;
    const outputs = await Promise.all(
      Array.from({ length: 4 }, () =>
        run(process.execPath, ["--input-type=module", "-e", child], { timeout: 30_000 }),
      ),
    );
    expect(outputs.map((output) => output.stdout)).toEqual(Array(4).fill("claimed"));
    const versions = await admin<{ version: number }>(
      url as string,
      `SELECT version FROM "${schema}".schema_version ORDER BY version`,
    );
    expect(versions.map((row) => row.version)).toEqual(
      Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1),
    );
  });

  it("reopening a migrated schema applies nothing and keeps the data", async () => {
    const schema = schemaToDrop();
    const target = withParams(url as string, { schema });
    const first = await openStores(target);
    await first.usage.tryConsume("ns", "g", 5);
    await first.close();
    const second = await openStores(target);
    expect(await second.usage.getUsage("ns", "g")).toBe(1);
    await second.close();
  });

  it("refuses a schema migrated by a newer build with schema_unavailable", async () => {
    const schema = schemaToDrop();
    const target = withParams(url as string, { schema });
    await (await openStores(target)).close();
    await admin(url as string, `INSERT INTO "${schema}".schema_version (version) VALUES (999)`);
    await expect(openStores(target)).rejects.toMatchObject({ code: "schema_unavailable" });
  });

  it("self-test: a claims table without its primary key is refused (store_self_test_failed)", async () => {
    const schema = schemaToDrop();
    const target = withParams(url as string, { schema });
    await (await openStores(target)).close();
    await admin(url as string, `ALTER TABLE "${schema}".claims DROP CONSTRAINT claims_pkey`);
    await expect(openStores(target)).rejects.toMatchObject({ code: "store_self_test_failed" });
    await expect(openClaimStore(target)).rejects.toMatchObject({ code: "store_self_test_failed" });
  });

  it("self-test: a counter that does not count (a trigger rewrites it) is refused", async () => {
    const schema = schemaToDrop();
    const target = withParams(url as string, { schema });
    await (await openStores(target)).close();
    await admin(
      url as string,
      `CREATE FUNCTION "${schema}".stuck_counter() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN NEW.used := 0; RETURN NEW; END $$`,
    );
    await admin(
      url as string,
      `CREATE TRIGGER stuck_counter BEFORE INSERT OR UPDATE ON "${schema}".usage
        FOR EACH ROW EXECUTE FUNCTION "${schema}".stuck_counter()`,
    );
    await expect(openStores(target)).rejects.toMatchObject({ code: "store_self_test_failed" });
  });

  it("the self-test leaves no probe rows behind", async () => {
    const { schema } = await opened();
    const rows = await admin<{ n: string }>(
      url as string,
      `SELECT (SELECT count(*) FROM "${schema}".claims) + (SELECT count(*) FROM "${schema}".usage) AS n`,
    );
    expect(Number(rows[0]?.n)).toBe(0);
  });

  it("an unreachable server is refused at open with store_unavailable, quickly", async () => {
    const down = new URL(url as string);
    down.port = "1";
    await expect(
      openStores(withParams(down.toString(), { schema: "unused", connectTimeoutMs: "500" })),
    ).rejects.toMatchObject({ code: "store_unavailable" });
    await expect(
      openClaimStore(withParams(down.toString(), { schema: "unused" })),
    ).rejects.toMatchObject({ code: "claim_store_unavailable" });
  });

  it("backends terminated by the server: operations fail closed or answer, then recover", async () => {
    const store = await opened();
    const { usage, claims } = store.stores;
    await usage.tryConsume("ns", "g", 50);
    const killed = await terminateOwnBackends(url as string, store.applicationName);
    expect(killed).toBeGreaterThan(0);
    const outcomes = await Promise.allSettled(
      Array.from({ length: 20 }, () => usage.tryConsume("ns", "g", 50)),
    );
    const consumed = outcomes.filter((o) => o.status === "fulfilled" && o.value.consumed).length;
    for (const outcome of outcomes) {
      if (outcome.status === "rejected")
        expect(codeOf(outcome.reason)).toBe("usage_store_unavailable");
    }
    // Spent at most once per success, plus at most once per call that failed mid-flight.
    const used = await usage.getUsage("ns", "g");
    expect(used).toBeGreaterThanOrEqual(1 + consumed);
    expect(used).toBeLessThanOrEqual(21);
    const key = { session: "s", functionCallId: "after-kill" };
    expect(await claims.claim(key, { bodyHash: "h", claimedAt: 1 })).toEqual({ status: "claimed" });
  });

  it("SQL-shaped and NUL-bearing IDs are data: stored exactly, tables intact", async () => {
    const { stores, schema } = await opened();
    const hostile = [
      `'; DROP TABLE ${schema}.claims; --`,
      `"); DELETE FROM usage; --`,
      "a\u0000b",
      "\u0000",
      "$1",
      "x".repeat(1 << 20),
    ];
    for (const id of hostile) {
      const key = { session: id, functionCallId: id };
      expect((await stores.claims.claim(key, { bodyHash: id, claimedAt: 1 })).status).toBe(
        "claimed",
      );
      expect(await stores.claims.get(key)).toMatchObject({
        session: id,
        functionCallId: id,
        bodyHash: id,
      });
      expect(await stores.usage.tryConsume(id, id, 1)).toEqual({ consumed: true, used: 1 });
    }
    const tables = await admin<{ name: string }>(
      url as string,
      "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = $1",
      [schema],
    );
    expect(tables.map((t) => t.name).sort()).toEqual([
      "audit",
      "audit_heads",
      "claims",
      "grant_versions",
      "grants",
      "schema_version",
      "usage",
    ]);
    expect(await stores.claims.listInDoubt()).toHaveLength(hostile.length);
  });

  it("after close every port refuses with its own *_unavailable code", async () => {
    const schema = schemaToDrop();
    const stores = await openStores(withParams(url as string, { schema }));
    await stores.close();
    await expectClosedStoresRefuse(stores);
  });
});
