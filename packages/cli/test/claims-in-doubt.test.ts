import { randomUUID } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, truncateSync } from "node:fs";
import { join } from "node:path";
import { DirectoryClaimStore } from "@tessera/a2ui";
import { openStores } from "@tessera/sqlite";
import { describe, expect, it } from "vitest";
import { expectRefusal, scratch, tessera } from "./support/cli.js";

/**
 * `tessera claims --in-doubt` only reads. Before, `--store` opened the store as a writer
 * (migrate, self-test): a mistyped SQLite path became a new store, listed as "0 claim(s) in
 * doubt"; and a claim marker whose record was torn, which still blocks its call ID, was left
 * out of the listing.
 */

describe("claims --in-doubt --store: a store that is not there", () => {
  it("SQLite: schema_unavailable, as audit verify says, and no file is made", () => {
    const path = join(scratch(), "typo-tesera.db");
    const run = tessera("claims", "--in-doubt", "--store", `sqlite:${path}`);
    expectRefusal(run, "schema_unavailable");
    expect(run.stderr).toContain(`no database file at ${path}`);
    expect(run.stdout).not.toContain("claim(s) in doubt");
    expect(existsSync(path)).toBe(false);
  });

  const postgres = process.env.TESSERA_PG_URL;
  it.skipIf(!postgres)("PostgreSQL: a schema with no store is refused, and not created", () => {
    const url = new URL(postgres as string);
    url.searchParams.set("schema", `claims_probe_${randomUUID().slice(0, 8)}`);
    expectRefusal(tessera("claims", "--in-doubt", "--store", url.href), "schema_unavailable");
    // Had the listing created the store, verify would read it (an empty trail is intact).
    expectRefusal(tessera("audit", "verify", "--store", url.href), "schema_unavailable");
  });

  const redis = process.env.TESSERA_REDIS_URL;
  it.skipIf(!redis)("Redis: a prefix with no store is refused, and not created", () => {
    const url = new URL(redis as string);
    url.searchParams.set("prefix", `claims-probe-${randomUUID().slice(0, 8)}`);
    expectRefusal(tessera("claims", "--in-doubt", "--store", url.href), "schema_unavailable");
    expectRefusal(tessera("audit", "verify", "--store", url.href), "schema_unavailable");
  });
});

describe("claims --in-doubt --store: a store that is there", () => {
  it("lists its claims without an outcome", async () => {
    const url = `sqlite:${join(scratch(), "tessera.db")}`;
    const stores = await openStores(url);
    await stores.claims.claim(
      { session: "s-1", functionCallId: "died-here" },
      { bodyHash: "h", claimedAt: Date.now() },
    );
    await stores.close();
    const run = tessera("claims", "--in-doubt", "--store", url, "--json");
    expect(run.code).toBe(0);
    const listed = JSON.parse(run.stdout) as Array<{ functionCallId: string }>;
    expect(listed.map((claim) => claim.functionCallId)).toEqual(["died-here"]);
  });
});

describe("claims --in-doubt --dir: a marker that names no claim", () => {
  async function dirWithTornMarker(): Promise<{ dir: string; marker: string }> {
    const dir = join(scratch(), "claims");
    mkdirSync(dir, { mode: 0o700 });
    const store = await DirectoryClaimStore.open(dir);
    await store.claim(
      { session: "s-1", functionCallId: "torn" },
      { bodyHash: "h", claimedAt: Date.now() },
    );
    await store.close();
    const [marker] = readdirSync(dir);
    // What a worker killed between creating the marker and writing its record leaves.
    truncateSync(join(dir, marker as string), 0);
    return { dir, marker: marker as string };
  }

  it("is printed with what to do, not hidden behind '0 claim(s) in doubt'", async () => {
    const { dir, marker } = await dirWithTornMarker();
    const run = tessera("claims", "--in-doubt", "--dir", dir);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("0 claim(s) in doubt");
    expect(run.stdout).toContain("1 marker(s) that name no claim");
    expect(run.stdout).toContain(`marker=${marker} why=no_record modifiedAt=`);
    expect(run.stdout).toContain("its call ID stays claimed");
    expect(run.stdout).toContain("Find the call in the audit trail");
  });

  it("is an entry of the --json array, with its marker and why", async () => {
    const { dir, marker } = await dirWithTornMarker();
    const run = tessera("claims", "--in-doubt", "--dir", dir, "--json");
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual([
      { marker, why: "no_record", modifiedAt: expect.any(String) },
    ]);
  });
});
