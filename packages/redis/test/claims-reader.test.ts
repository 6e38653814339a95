/**
 * `openClaimReader` against a real server, as an operator listing in-doubt calls opens it:
 * claims listed and read with read commands only, no write handed out; a prefix at an older
 * layout than this build is `schema_unavailable` and left at its version (a writer's open is
 * what migrates it); a prefix with no store is refused and not made.
 */
import { expectClaimReaderReads, serviceUrl } from "@tessera/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { LAYOUT_VERSION, openClaimReader, openStores } from "../src/index.js";
import { admin, deletePrefix, freshPrefix, withParams } from "./support/redis-test-stores.js";

const url = serviceUrl("TESSERA_REDIS_URL");
const suite = url ? describe : describe.skip;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

suite("Redis openClaimReader", () => {
  const base = url as string;
  async function storeWithInDoubt() {
    const prefix = freshPrefix();
    cleanups.push(() => deletePrefix(base, prefix));
    const target = withParams(base, { prefix });
    const stores = await openStores(target);
    try {
      await stores.claims.claim(
        { session: "s", functionCallId: "open" },
        { bodyHash: "h", claimedAt: 1 },
      );
    } finally {
      await stores.close();
    }
    return { prefix, target };
  }
  const versionOf = (prefix: string) =>
    admin(base, (redis) => redis.get(`${prefix}layout-version`));

  it("lists and reads claims, handing out no write", async () => {
    const { target } = await storeWithInDoubt();
    const reader = await openClaimReader(target);
    try {
      await expectClaimReaderReads(reader);
    } finally {
      await reader.close();
    }
  });

  it("a prefix at an older layout is schema_unavailable and stays at its version", async () => {
    const { prefix, target } = await storeWithInDoubt();
    const older = LAYOUT_VERSION - 1;
    await admin(base, (redis) => redis.set(`${prefix}layout-version`, String(older)));
    await expect(openClaimReader(target)).rejects.toMatchObject({
      code: "schema_unavailable",
      message: expect.stringContaining(
        `at version ${older}, older than this build (${LAYOUT_VERSION}): listing its claims would need it upgraded`,
      ),
    });
    expect(await versionOf(prefix)).toBe(String(older));
  });

  it("a prefix with no store is schema_unavailable, and is not made", async () => {
    const prefix = freshPrefix();
    cleanups.push(() => deletePrefix(base, prefix));
    await expect(openClaimReader(withParams(base, { prefix }))).rejects.toMatchObject({
      code: "schema_unavailable",
    });
    expect(await versionOf(prefix)).toBeNull();
  });
});
