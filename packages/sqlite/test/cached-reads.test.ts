/**
 * The grant-version and usage reads a warm service asks on every denial are answered from
 * memory while nothing can have changed them (`SqliteDatabase.cachedRead`): no write on the
 * connection since, and no commit by another (`PRAGMA data_version`). Checked here from both
 * sides: a change made through this bundle, through another connection to the same file (as
 * another process or the CLI would), and straight with SQL, is seen by the very next read;
 * and reads with nothing changed in between run their query once, counted at the driver.
 */
import { grantInput } from "@tessera/testkit";
import BetterSqlite3 from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openStores } from "../src/index.js";
import { type OpenedSqlite, openFresh } from "./helpers.js";

const NS = "ns-cache";

/** Counts `get` of statements whose SQL reads the given table, in this process. */
function countReads(table: string) {
  const prototype = Object.getPrototypeOf(new BetterSqlite3(":memory:").prepare("SELECT 1")) as {
    get: (this: { source: string }, ...args: unknown[]) => unknown;
  };
  const original = prototype.get;
  let reads = 0;
  prototype.get = function get(this: { source: string }, ...args: unknown[]) {
    if (this.source.includes(table)) reads++;
    return original.apply(this, args);
  };
  return {
    get reads() {
      return reads;
    },
    stop: () => {
      prototype.get = original;
    },
  };
}

let opened: OpenedSqlite;
beforeEach(async () => {
  opened = await openFresh();
});
afterEach(async () => {
  await opened.close();
});

describe("SQLite cached reads: grant versions and usage", () => {
  it("reads with nothing changed in between run their query once", async () => {
    const { grants, usage } = opened.stores;
    await grants.add(grantInput({ id: "g-1", namespaceId: NS }));
    const versions = countReads("tessera_grant_versions");
    const used = countReads("tessera_usage");
    try {
      const first = await grants.grantsVersion?.(NS, "agent");
      for (let i = 0; i < 100; i++) expect(await grants.grantsVersion?.(NS, "agent")).toBe(first);
      for (let i = 0; i < 100; i++) expect(await usage.getUsage(NS, "g-1")).toBe(0);
      expect(versions.reads).toBe(1);
      expect(used.reads).toBe(1);
    } finally {
      versions.stop();
      used.stop();
    }
  });

  it("a change through this bundle is seen by the next read", async () => {
    const { grants, usage } = opened.stores;
    const before = await grants.grantsVersion?.(NS, "agent");
    expect(await usage.getUsage(NS, "g-1")).toBe(0);
    await grants.add(grantInput({ id: "g-1", namespaceId: NS }));
    const after = await grants.grantsVersion?.(NS, "agent");
    expect(after).not.toBe(before);
    expect(await usage.tryConsume(NS, "g-1", 5)).toMatchObject({ consumed: true });
    expect(await usage.getUsage(NS, "g-1")).toBe(1);
    await grants.revoke(NS, "g-1");
    expect(await grants.grantsVersion?.(NS, "agent")).not.toBe(after);
  });

  it("a change by another connection to the file is seen by the next read", async () => {
    const { grants, usage } = opened.stores;
    const other = await openStores(opened.url);
    try {
      const before = await grants.grantsVersion?.(NS, "agent");
      expect(await usage.getUsage(NS, "g-2")).toBe(0);
      await other.grants.add(grantInput({ id: "g-2", namespaceId: NS }));
      expect(await grants.grantsVersion?.(NS, "agent")).toBe(
        await other.grants.grantsVersion?.(NS, "agent"),
      );
      expect(await grants.grantsVersion?.(NS, "agent")).not.toBe(before);
      expect(await other.usage.tryConsume(NS, "g-2", 5)).toMatchObject({ consumed: true });
      expect(await usage.getUsage(NS, "g-2")).toBe(1);
    } finally {
      await other.close();
    }
  });

  it("a change written with plain SQL is seen by the next read", async () => {
    const { usage } = opened.stores;
    expect(await usage.getUsage(NS, "g-3")).toBe(0);
    const raw = new BetterSqlite3(opened.url.slice("sqlite:".length));
    try {
      raw
        .prepare("INSERT INTO tessera_usage (namespace_id, grant_id, used) VALUES (?, ?, 3)")
        .run(NS, "g-3");
    } finally {
      raw.close();
    }
    expect(await usage.getUsage(NS, "g-3")).toBe(3);
  });
});
