/**
 * `openClaimReader` over a file, as an operator listing in-doubt calls opens it: claims listed
 * and read, no write handed out; a file older than this build is `schema_unavailable` and
 * left at its version (a writer's open is what migrates it); no file is made where none was.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { openClaimReader, openStores, SCHEMA_VERSION } from "@tessera/sqlite";
import { expectClaimReaderReads } from "@tessera/testkit";
import BetterSqlite3 from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { parseSqliteUrl } from "../src/config.js";
import { SqliteDatabase } from "../src/database.js";
import { migrate } from "../src/migrations.js";
import { freshFile } from "./helpers.js";

const files: { dispose(): void }[] = [];
afterEach(() => {
  for (const made of files.splice(0)) made.dispose();
});

function versionOf(path: string): number {
  const raw = new BetterSqlite3(path, { readonly: true });
  try {
    return (
      raw.prepare("SELECT max(version) AS v FROM tessera_schema_version").get() as { v: number }
    ).v;
  } finally {
    raw.close();
  }
}

describe("SQLite openClaimReader", () => {
  it("lists and reads claims, handing out no write", async () => {
    const file = freshFile();
    files.push(file);
    const url = `sqlite:${file.path}`;
    const stores = await openStores(url);
    await stores.claims.claim(
      { session: "s", functionCallId: "open" },
      { bodyHash: "h", claimedAt: 1 },
    );
    await stores.close();
    const reader = await openClaimReader(url);
    try {
      await expectClaimReaderReads(reader);
    } finally {
      await reader.close();
    }
  });

  it("a file older than this build is schema_unavailable and stays at its version", async () => {
    const file = freshFile();
    files.push(file);
    const url = `sqlite:${file.path}`;
    const older = SCHEMA_VERSION - 1;
    const old = SqliteDatabase.open(parseSqliteUrl(url), "store_unavailable");
    migrate(old, "store_unavailable", older);
    old.close();
    await expect(openClaimReader(url)).rejects.toMatchObject({
      code: "schema_unavailable",
      message: expect.stringContaining(
        `at version ${older}, older than this build (${SCHEMA_VERSION}): listing its claims would need it upgraded`,
      ),
    });
    expect(versionOf(file.path)).toBe(older);
  });

  it("a path with no file is schema_unavailable, and no file is made", async () => {
    const file = freshFile();
    files.push(file);
    const path = join(file.path, "..", "not-there.db");
    await expect(openClaimReader(`sqlite:${path}`)).rejects.toMatchObject({
      code: "schema_unavailable",
    });
    expect(existsSync(path)).toBe(false);
  });
});
