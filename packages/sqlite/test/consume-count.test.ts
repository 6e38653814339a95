/**
 * A consume reads its new count back through tessera_note() rather than RETURNING
 * (usage-store.ts). The count it reports must be the row's own count right after its write:
 * on a first use, after writes by another connection, for every write of a shared batch, and
 * at the bound.
 */
import { openStores } from "@tessera/sqlite";
import BetterSqlite3 from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { freshFile } from "./helpers.js";

const files: { dispose(): void }[] = [];
afterEach(() => {
  for (const made of files.splice(0)) made.dispose();
});

async function opened() {
  const made = freshFile();
  files.push(made);
  const stores = await openStores(`sqlite:${made.path}`);
  const other = new BetterSqlite3(made.path);
  other.pragma("busy_timeout = 5000");
  return { stores, other };
}

describe("the count a consume reports", () => {
  it("is 1 on a first use, then the row's count after writes by another connection", async () => {
    const { stores, other } = await opened();
    expect(await stores.usage.tryConsume("ns", "g", 10)).toEqual({ consumed: true, used: 1 });
    other
      .prepare("UPDATE tessera_usage SET used = 6 WHERE namespace_id = ? AND grant_id = ?")
      .run("ns", "g");
    expect(await stores.usage.tryConsume("ns", "g", 10)).toEqual({ consumed: true, used: 7 });
    expect(await stores.usage.getUsage("ns", "g")).toBe(7);
    other.close();
    await stores.close();
  });

  it("at the bound: refused with the row's count, which does not move", async () => {
    const { stores, other } = await opened();
    other
      .prepare("INSERT INTO tessera_usage (namespace_id, grant_id, used) VALUES (?, ?, ?)")
      .run("ns", "g", 3);
    expect(await stores.usage.tryConsume("ns", "g", 4)).toEqual({ consumed: true, used: 4 });
    expect(await stores.usage.tryConsume("ns", "g", 4)).toEqual({ consumed: false, used: 4 });
    expect(await stores.usage.tryConsume("ns", "other", 1)).toEqual({ consumed: true, used: 1 });
    expect(await stores.usage.tryConsume("ns", "g", 4)).toEqual({ consumed: false, used: 4 });
    other.close();
    await stores.close();
  });

  it("in one shared commit: each write reports its own count, 1 to the bound once each", async () => {
    const { stores, other } = await opened();
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        stores.usage.tryConsume("ns", i % 2 === 0 ? "even" : "odd", 15),
      ),
    );
    for (const grant of ["even", "odd"]) {
      const mine = results.filter((_, i) => (i % 2 === 0 ? "even" : "odd") === grant);
      const used = mine.filter((r) => r.consumed).map((r) => r.used);
      expect(used).toEqual(Array.from({ length: 15 }, (_, i) => i + 1));
      expect(mine.filter((r) => !r.consumed)).toEqual(
        Array.from({ length: 5 }, () => ({ consumed: false, used: 15 })),
      );
    }
    const rows = other
      .prepare("SELECT grant_id, used FROM tessera_usage ORDER BY grant_id")
      .all() as { grant_id: string; used: number }[];
    expect(rows).toEqual([
      { grant_id: "even", used: 15 },
      { grant_id: "odd", used: 15 },
    ]);
    other.close();
    await stores.close();
  });

  it("a trigger in a tampered file cannot call the function to change it: refused", async () => {
    const { stores, other } = await opened();
    other.exec(`CREATE TRIGGER tessera_usage_lie AFTER UPDATE ON tessera_usage
      BEGIN SELECT tessera_note(999); END`);
    const refused = await stores.usage.tryConsume("ns", "g", 10).catch((error) => error);
    expect(refused).toMatchObject({ code: "usage_store_unavailable" });
    other.close();
    await stores.close();
  });
});
