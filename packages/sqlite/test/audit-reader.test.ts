/**
 * `openAuditReader` on a real file: it reads and pages through the trail and writes nothing
 * (the file's bytes are the same after), never creates the file it was asked to read, and a
 * file with no store, or one newer than this build, is `schema_unavailable`.
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { openAuditReader, openStores, SCHEMA_VERSION } from "@tessera/sqlite";
import { auditEvent, expectReadOnlyReader } from "@tessera/testkit";
import BetterSqlite3 from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { freshFile } from "./helpers.js";

const files: { dispose(): void }[] = [];
afterEach(() => {
  for (const made of files.splice(0)) made.dispose();
});

function file(): string {
  const made = freshFile();
  files.push(made);
  return made.path;
}

const digest = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex");

describe("SQLite openAuditReader", () => {
  it("reads and pages through the trail, and the file's bytes are the same after", async () => {
    const path = file();
    const stores = await openStores(`sqlite:${path}`);
    for (let i = 0; i < 7; i++) await stores.audit.append(auditEvent(i));
    const whole = await stores.audit.read();
    await stores.close();
    const before = digest(path);

    const reader = await openAuditReader(`sqlite:${path}`);
    await expectReadOnlyReader(reader, whole);
    await reader.close();
    // Nothing was written: not a byte of the database changed.
    expect(digest(path)).toBe(before);
  });

  it("never creates the file it was asked to read, even told create=true", async () => {
    const path = file();
    for (const url of [`sqlite:${path}`, `sqlite:${path}?create=true`]) {
      await expect(openAuditReader(url)).rejects.toMatchObject({ code: "schema_unavailable" });
    }
    expect(existsSync(path)).toBe(false);
  });

  it("a file with no store is schema_unavailable, and gains no table", async () => {
    const path = file();
    new BetterSqlite3(path).close();
    await expect(openAuditReader(`sqlite:${path}`)).rejects.toMatchObject({
      code: "schema_unavailable",
    });
    const raw = new BetterSqlite3(path, { readonly: true });
    expect(raw.prepare("SELECT count(*) AS n FROM sqlite_master").get()).toEqual({ n: 0 });
    raw.close();
  });

  it("a file newer than this build is schema_unavailable", async () => {
    const path = file();
    await (await openStores(`sqlite:${path}`)).close();
    const raw = new BetterSqlite3(path);
    raw
      .prepare("INSERT INTO tessera_schema_version (version, applied_at) VALUES (?, ?)")
      .run(SCHEMA_VERSION + 1, new Date().toISOString());
    raw.close();
    await expect(openAuditReader(`sqlite:${path}`)).rejects.toMatchObject({
      code: "schema_unavailable",
    });
  });
});
