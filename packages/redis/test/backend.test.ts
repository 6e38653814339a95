import { claimKeyDigest, storageDigest } from "@tessera/core/store-kit";
import { expectClosedStoresRefuse, serviceUrl } from "@tessera/testkit";
import { Redis } from "ioredis";
import { afterEach, describe, expect, it, vi } from "vitest";
import { LAYOUT_VERSION, openClaimStore, openStores } from "../src/index.js";
import {
  admin,
  deletePrefix,
  freshPrefix,
  killOwnClients,
  openTestStores,
  waitUntilAnswering,
  withParams,
} from "./support/redis-test-stores.js";

/**
 * Redis-specific behaviour the shared suites do not reach: a server that ignores NX or PX
 * (the store must refuse to open), EVALSHA falling back to EVAL, connections killed by
 * the server, claim TTLs, and the store's own refusals.
 */
const url = serviceUrl("TESSERA_REDIS_URL");
const suite = url ? describe : describe.skip;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

async function opened(extra: Record<string, string> = {}) {
  const stores = await openTestStores(url as string, extra);
  cleanups.push(() => stores.close());
  return stores;
}

function prefixToDelete(): string {
  const prefix = freshPrefix();
  cleanups.push(() => deletePrefix(url as string, prefix));
  return prefix;
}

/**
 * Makes the server this process talks to behave as if its SET ignored `flag` (as some
 * Redis-compatible servers and mocks do): the claim's `SET … NX GET` loses the flag (and
 * its argument) before it reaches the server. Other SETs (layout version) pass untouched.
 */
function setIgnores(flag: "NX" | "PX"): void {
  const original = Redis.prototype.set;
  vi.spyOn(Redis.prototype, "set").mockImplementation(function (this: Redis, ...args: unknown[]) {
    const at = args.indexOf(flag);
    if (args.includes("GET")) {
      if (at < 0) throw new Error("test fake: the claim no longer has the flag to drop");
      args.splice(at, flag === "PX" ? 2 : 1);
    }
    return (original as (...a: unknown[]) => Promise<unknown>).apply(this, args) as never;
  });
}

suite("redis backend", () => {
  it("a server whose SET ignores NX is refused at open (store_self_test_failed)", async () => {
    const prefix = prefixToDelete();
    setIgnores("NX");
    await expect(openStores(withParams(url as string, { prefix }))).rejects.toMatchObject({
      code: "store_self_test_failed",
    });
    await expect(openClaimStore(withParams(url as string, { prefix }))).rejects.toMatchObject({
      code: "store_self_test_failed",
    });
  });

  it("a server whose SET drops the TTL is refused at open (store_self_test_failed)", async () => {
    const prefix = prefixToDelete();
    setIgnores("PX");
    await expect(openStores(withParams(url as string, { prefix }))).rejects.toMatchObject({
      code: "store_self_test_failed",
    });
  });

  it("a server that may evict keys (maxmemory with an eviction policy) is refused", async () => {
    const prefix = prefixToDelete();
    const original = Redis.prototype.info;
    const reportPolicy = (policy: string) =>
      vi.spyOn(Redis.prototype, "info").mockImplementation(function (this: Redis, ...args) {
        // Only the memory section is faked; the client's own ready check reads the rest.
        if (args[0] !== "memory") return (original as (...a: unknown[]) => never).apply(this, args);
        return Promise.resolve(
          `# Memory\r\nmaxmemory:104857600\r\nmaxmemory_policy:${policy}\r\n`,
        ) as never;
      });
    reportPolicy("allkeys-lru");
    await expect(openStores(withParams(url as string, { prefix }))).rejects.toMatchObject({
      code: "store_self_test_failed",
    });
    vi.restoreAllMocks();
    reportPolicy("noeviction");
    await (await openStores(withParams(url as string, { prefix }))).close();
  });

  it("a database the server does not have is refused at open, and nothing lands in database 0", async () => {
    const prefix = prefixToDelete();
    const base = new URL(url as string);
    base.pathname = "/9999";
    await expect(openStores(withParams(base.toString(), { prefix }))).rejects.toMatchObject({
      code: "invalid_config",
      message: expect.stringContaining("no database 9999"),
    });
    // Before the check, the store opened on database 0 and wrote its layout version there.
    expect(await admin(url as string, (redis) => redis.keys(`${prefix}*`))).toEqual([]);
  });

  it("records its key layout version once, and refuses a prefix written by a newer build", async () => {
    const { prefix } = await opened();
    expect(await admin(url as string, (redis) => redis.get(`${prefix}layout-version`))).toBe(
      String(LAYOUT_VERSION),
    );
    const newer = prefixToDelete();
    await admin(url as string, (redis) => redis.set(`${newer}layout-version`, "99"));
    await expect(openStores(withParams(url as string, { prefix: newer }))).rejects.toMatchObject({
      code: "schema_unavailable",
    });
  });

  it("a claim reply that is neither a win nor a held key fails closed, never claimed", async () => {
    const { stores } = await opened();
    const key = { session: "s", functionCallId: "odd" };
    for (const odd of ["OK", 1, ["OK"], "", "not json", '{"bodyHash":"h"}', undefined]) {
      vi.spyOn(Redis.prototype, "set").mockResolvedValueOnce(odd as never);
      await expect(stores.claims.claim(key, { bodyHash: "h", claimedAt: 1 })).rejects.toMatchObject(
        {
          code: "claim_store_unavailable",
        },
      );
    }
    vi.restoreAllMocks();
    expect(await stores.claims.claim(key, { bodyHash: "h", claimedAt: 1 })).toEqual({
      status: "claimed",
    });
  });

  it("the same client, honest, opens; the self-test leaves no keys behind", async () => {
    const { prefix } = await opened();
    const keys = await admin(url as string, (redis) => redis.keys(`${prefix}*`));
    expect(keys).toEqual([`${prefix}layout-version`]);
  });

  it("opening walks no keyspace: the self-test removes its probe keys by name, no SCAN", async () => {
    // Every open used to end the probe's session with SCAN: seconds on a server of millions
    // of keys, paid by every service, gateway and CLI start.
    const scan = vi.spyOn(Redis.prototype, "scan");
    const { prefix } = await opened();
    expect(scan).not.toHaveBeenCalled();
    const keys = await admin(url as string, (redis) => redis.keys(`${prefix}*`));
    expect(keys).toEqual([`${prefix}layout-version`]);
  });

  it("a claim carries the configured TTL, and an expired claim leaves the in-doubt list", async () => {
    const { stores, prefix } = await opened({ claimTtlMs: "1000" });
    const key = { session: "s", functionCallId: "f" };
    await stores.claims.claim(key, { bodyHash: "h", claimedAt: 1 });
    const claimKeys = await admin(url as string, (redis) => redis.keys(`${prefix}claim:*`));
    expect(claimKeys).toHaveLength(1);
    const pttl = await admin(url as string, (redis) => redis.pttl(claimKeys[0] as string));
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(1000);
    expect(await stores.claims.listInDoubt("s")).toHaveLength(1);
    await admin(url as string, (redis) => redis.pexpire(claimKeys[0] as string, 1));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await stores.claims.listInDoubt("s")).toEqual([]);
    expect(await stores.claims.listInDoubt()).toEqual([]);
  });

  it("EVALSHA answered NOSCRIPT falls back to EVAL and still counts once", async () => {
    const { stores } = await opened();
    const evalsha = vi
      .spyOn(Redis.prototype, "evalsha")
      .mockRejectedValueOnce(new Error("NOSCRIPT No matching script. Please use EVAL."));
    const evalSpy = vi.spyOn(Redis.prototype, "eval");
    expect(await stores.usage.tryConsume("ns", "g", 1)).toEqual({ consumed: true, used: 1 });
    expect(evalsha).toHaveBeenCalledTimes(1);
    expect(evalSpy).toHaveBeenCalledTimes(1);
    expect(await stores.usage.tryConsume("ns", "g", 1)).toEqual({ consumed: false, used: 1 });
  });

  it("connections killed by the server: operations fail closed or answer, then recover", async () => {
    const store = await opened();
    const { usage, claims } = store.stores;
    await usage.tryConsume("ns", "g", 50);
    expect(await killOwnClients(url as string, store.connectionName)).toBeGreaterThan(0);
    const outcomes = await Promise.allSettled(
      Array.from({ length: 20 }, () => usage.tryConsume("ns", "g", 50)),
    );
    const consumed = outcomes.filter((o) => o.status === "fulfilled" && o.value.consumed).length;
    for (const outcome of outcomes) {
      if (outcome.status === "rejected") {
        expect(outcome.reason).toMatchObject({ code: "usage_store_unavailable" });
      }
    }
    await waitUntilAnswering(() => usage.getUsage("ns", "g"));
    const used = await usage.getUsage("ns", "g");
    expect(used).toBeGreaterThanOrEqual(1 + consumed);
    expect(used).toBeLessThanOrEqual(21);
    const key = { session: "s", functionCallId: "after-kill" };
    expect(await claims.claim(key, { bodyHash: "h", claimedAt: 1 })).toEqual({ status: "claimed" });
  });

  it("while the proxy is down, operations fail at once (no offline queue), then recover", async () => {
    const store = await opened();
    store.proxy.interrupt();
    await killOwnClients(url as string, store.connectionName);
    const started = Date.now();
    await expect(store.stores.usage.tryConsume("ns", "g", 5)).rejects.toMatchObject({
      code: "usage_store_unavailable",
    });
    await expect(store.stores.audit.read()).rejects.toMatchObject({ code: "audit_unavailable" });
    // Fails closed without waiting for a reconnect (the command timeout is 5 s by default).
    expect(Date.now() - started).toBeLessThan(4_000);
    store.proxy.restore();
    await waitUntilAnswering(() => store.stores.usage.getUsage("ns", "g"));
    expect(await store.stores.usage.tryConsume("ns", "g", 5)).toEqual({ consumed: true, used: 1 });
  });

  it("no raw ID ever reaches a key name: every key is the prefix plus digests", async () => {
    const { stores, prefix } = await opened();
    const hostile = "'; FLUSHALL; \r\n*1\r\n$8\r\nFLUSHALL\r\n\u0000 ../../";
    await stores.claims.claim(
      { session: hostile, functionCallId: hostile },
      { bodyHash: hostile, claimedAt: 1 },
    );
    await stores.usage.tryConsume(hostile, hostile, 3);
    await stores.audit.append({
      at: new Date().toISOString(),
      source: "gate",
      outcome: "denied",
      code: "INVALID_FUNCTION_CALL",
      reason: "duplicate_call",
      traceId: hostile,
      callId: hostile,
      session: hostile,
    });
    const keys = await admin(url as string, (redis) => redis.keys(`${prefix}*`));
    expect(keys.length).toBeGreaterThan(0);
    for (const key of keys) expect(key.slice(prefix.length)).toMatch(/^[a-z-]+(:[0-9a-f]{64})*$/);
    expect(await stores.claims.get({ session: hostile, functionCallId: hostile })).toMatchObject({
      session: hostile,
      bodyHash: hostile,
    });
    expect((await stores.audit.read({ callId: hostile }))[0]?.session).toBe(hostile);
  });

  it("endSession deletes that session's claims only", async () => {
    const { stores, prefix } = await opened();
    await stores.claims.claim(
      { session: "a", functionCallId: "1" },
      { bodyHash: "h", claimedAt: 1 },
    );
    await stores.claims.claim(
      { session: "a", functionCallId: "2" },
      { bodyHash: "h", claimedAt: 2 },
    );
    await stores.claims.claim(
      { session: "b", functionCallId: "1" },
      { bodyHash: "h", claimedAt: 3 },
    );
    await stores.claims.endSession("a");
    expect(await stores.claims.get({ session: "a", functionCallId: "1" })).toBeUndefined();
    expect(await stores.claims.listInDoubt()).toHaveLength(1);
    const keys = await admin(url as string, (redis) => redis.keys(`${prefix}*`));
    // b's claim and the layout version: a claim has no index keys beside it.
    expect(keys.sort()).toEqual([
      `${prefix}claim:${storageDigest("b")}:${storageDigest("1")}`,
      `${prefix}layout-version`,
    ]);
  });

  it("an unreachable server is refused at open with store_unavailable", async () => {
    const down = new URL(url as string);
    down.port = "1";
    await expect(openStores(down.toString())).rejects.toMatchObject({ code: "store_unavailable" });
    await expect(openClaimStore(down.toString())).rejects.toMatchObject({
      code: "claim_store_unavailable",
    });
  });

  it("after close every port refuses with its own *_unavailable code", async () => {
    const prefix = prefixToDelete();
    const stores = await openStores(withParams(url as string, { prefix }));
    await stores.close();
    await expectClosedStoresRefuse(stores);
  });

  it("a server older than Redis 7.0 (no SET NX GET) is refused at open", async () => {
    const prefix = prefixToDelete();
    const original = Redis.prototype.info;
    vi.spyOn(Redis.prototype, "info").mockImplementation(function (this: Redis, ...args) {
      if (args[0] !== "server") return (original as (...a: unknown[]) => never).apply(this, args);
      return Promise.resolve("# Server\r\nredis_version:6.2.14\r\n") as never;
    });
    await expect(openStores(withParams(url as string, { prefix }))).rejects.toMatchObject({
      code: "store_self_test_failed",
      message: expect.stringContaining("Redis 7.0 or later"),
    });
  });

  describe("a prefix at layout version 1 (claim sets beside each claim)", () => {
    const ttlMs = 60_000;
    /** Writes claims the way the version-1 build did: one digest key, two index sets. */
    async function writeVersion1(prefix: string, settledToo = true): Promise<void> {
      await admin(url as string, async (redis) => {
        await redis.set(`${prefix}layout-version`, "1");
        const claims = [
          { session: "s", functionCallId: "open", bodyHash: "h1", claimedAt: 1 },
          ...(settledToo
            ? [{ session: "s", functionCallId: "done", bodyHash: "h2", claimedAt: 2 }]
            : []),
        ];
        for (const claim of claims) {
          const id = claimKeyDigest({
            session: claim.session,
            functionCallId: claim.functionCallId,
          });
          const receipt =
            claim.functionCallId === "done" ? '\n{"status":"dispatched","settledAt":3}' : "";
          await redis.set(`${prefix}claim:${id}`, JSON.stringify(claim) + receipt, "PX", ttlMs);
          await redis.sadd(`${prefix}session:${storageDigest(claim.session)}`, id);
          if (!receipt) await redis.sadd(`${prefix}in-doubt`, id);
        }
      });
    }

    it("is migrated at open: claims keep their records, receipts and TTLs; the sets go", async () => {
      const prefix = prefixToDelete();
      await writeVersion1(prefix);
      // Two processes' worth of openers at once: one migrates, the other waits for it.
      const [a, b] = await Promise.all([
        openStores(withParams(url as string, { prefix })),
        openStores(withParams(url as string, { prefix })),
      ]);
      cleanups.push(
        () => a.close(),
        () => b.close(),
      );
      const keys = (await admin(url as string, (redis) => redis.keys(`${prefix}*`))).sort();
      expect(keys).toEqual(
        [
          `${prefix}claim:${storageDigest("s")}:${storageDigest("done")}`,
          `${prefix}claim:${storageDigest("s")}:${storageDigest("open")}`,
          `${prefix}layout-version`,
        ].sort(),
      );
      expect(await admin(url as string, (redis) => redis.get(`${prefix}layout-version`))).toBe(
        String(LAYOUT_VERSION),
      );
      const ttl = await admin(url as string, (redis) => redis.pttl(keys[0] as string));
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(ttlMs);
      for (const stores of [a, b]) {
        const open = { session: "s", functionCallId: "open" };
        expect(await stores.claims.claim(open, { bodyHash: "again", claimedAt: 9 })).toEqual({
          status: "already_claimed",
          existing: { ...open, bodyHash: "h1", claimedAt: 1 },
        });
        expect(
          (await stores.claims.get({ session: "s", functionCallId: "done" }))?.receipt,
        ).toEqual({ status: "dispatched", settledAt: 3 });
        expect((await stores.claims.listInDoubt("s")).map((c) => c.functionCallId)).toEqual([
          "open",
        ]);
      }
    });

    it("a migration whose holder died (lock lapsing, some claims renamed) is finished by the next opener", async () => {
      const prefix = prefixToDelete();
      await writeVersion1(prefix);
      const done = { session: "s", functionCallId: "done" };
      const newKey = `${prefix}claim:${storageDigest("s")}:${storageDigest("done")}`;
      await admin(url as string, async (redis) => {
        // The dead process had renamed "done" (and a copy of its old key is left), and its
        // lock has 300 ms left to live.
        await redis.copy(`${prefix}claim:${claimKeyDigest(done)}`, newKey);
        await redis.set(`${prefix}layout-migration`, "dead-process", "PX", 300);
      });
      const started = Date.now();
      const stores = await openStores(withParams(url as string, { prefix }));
      cleanups.push(() => stores.close());
      expect(Date.now() - started).toBeGreaterThanOrEqual(250);
      expect(await admin(url as string, (redis) => redis.get(`${prefix}layout-version`))).toBe(
        String(LAYOUT_VERSION),
      );
      expect(
        (await admin(url as string, (redis) => redis.keys(`${prefix}claim:*`))).sort(),
      ).toEqual([newKey, `${prefix}claim:${storageDigest("s")}:${storageDigest("open")}`].sort());
      expect((await stores.claims.get(done))?.receipt?.status).toBe("dispatched");
      expect(
        await stores.claims.claim(
          { session: "s", functionCallId: "open" },
          { bodyHash: "x", claimedAt: 5 },
        ),
      ).toMatchObject({ status: "already_claimed" });
    });

    it("an unreadable version-1 claim stops the migration and the open (fail closed)", async () => {
      const prefix = prefixToDelete();
      await writeVersion1(prefix, false);
      await admin(url as string, (redis) => redis.set(`${prefix}claim:${"0".repeat(64)}`, "{oops"));
      await expect(openStores(withParams(url as string, { prefix }))).rejects.toMatchObject({
        code: "schema_unavailable",
      });
      expect(await admin(url as string, (redis) => redis.get(`${prefix}layout-version`))).toBe("1");
      expect(await admin(url as string, (redis) => redis.exists(`${prefix}layout-migration`))).toBe(
        0,
      );
    });
  });
});
