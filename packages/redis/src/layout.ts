import { TesseraError } from "@tessera/core";
import type { Connection } from "./connection.js";

/**
 * The version of the key layout (docs/stores.md, "Redis"), kept under `<prefix>layout-version`.
 * Redis has no schema, but the layout is one: a prefix written by a newer Tessera is refused
 * rather than half understood, and a future layout change bumps this number and migrates
 * here, under the same check. Written with SET NX, so processes opening a fresh prefix at
 * once agree on one value.
 */
export const LAYOUT_VERSION = 1;

export async function checkLayout(connection: Connection): Promise<void> {
  const key = connection.key("layout-version");
  const stored = await connection.run("store_unavailable", async (redis) => {
    await redis.set(key, String(LAYOUT_VERSION), "NX");
    return redis.get(key);
  });
  const version = Number(stored);
  if (!Number.isInteger(version) || version < 1) {
    throw new TesseraError("store_self_test_failed", "the prefix's layout version is unreadable");
  }
  if (version > LAYOUT_VERSION) {
    throw new TesseraError(
      "schema_unavailable",
      `the key prefix is at layout version ${version}, newer than this build (${LAYOUT_VERSION})`,
    );
  }
}
