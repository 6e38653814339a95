import type { ConsumeResult } from "@tessera/core";
import { serviceUrl } from "@tessera/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { RedisClaimStore } from "../src/claim-store.js";
import { parseRedisUrl } from "../src/config.js";
import { Connection } from "../src/connection.js";
import { RedisUsageStore } from "../src/usage-store.js";
import { admin, deletePrefix, freshPrefix, withParams } from "./support/redis-test-stores.js";

/**
 * Claims and bounded consumes issued in one tick go as one script call. What is counted is
 * what the store's own connection sends (its `sendCommand`), so other tests sharing the
 * server cannot disturb the counts; the answers come from the real server.
 */
const url = serviceUrl("TESSERA_REDIS_URL");
const suite = url ? describe : describe.skip;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

interface Opened {
  readonly connection: Connection;
  readonly claims: RedisClaimStore;
  readonly usage: RedisUsageStore;
  readonly prefix: string;
  /** Names of the commands this connection sent since the last `take()`. */
  take(): string[];
}

async function open(prefix = freshPrefix()): Promise<Opened> {
  const connection = new Connection(parseRedisUrl(withParams(url as string, { prefix })));
  await connection.connect("store_unavailable");
  cleanups.push(async () => {
    await connection.close();
    await deletePrefix(url as string, prefix);
  });
  const sent: string[] = [];
  const redis = connection.redis;
  const send = redis.sendCommand.bind(redis);
  redis.sendCommand = (command, stream) => {
    sent.push(command.name);
    return send(command, stream);
  };
  return {
    connection,
    claims: new RedisClaimStore(connection, 60_000),
    usage: new RedisUsageStore(connection),
    prefix,
    take: () => sent.splice(0),
  };
}

const key = (id: string) => ({ session: "same-tick", functionCallId: id });

suite("redis: claims issued in one tick", () => {
  it("one script call; one winner per key in issue order, the others read the winner's record", async () => {
    const { claims, take } = await open();
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        claims.claim(key(`k${i % 10}`), { bodyHash: `h${i}`, claimedAt: i }),
      ),
    );
    expect(take()).toEqual(["evalsha"]);
    for (let k = 0; k < 10; k++) {
      const mine = results.filter((_, i) => i % 10 === k);
      expect(mine[0]).toEqual({ status: "claimed" });
      for (const later of mine.slice(1)) {
        expect(later).toEqual({
          status: "already_claimed",
          existing: {
            session: "same-tick",
            functionCallId: `k${k}`,
            bodyHash: `h${k}`,
            claimedAt: k,
          },
        });
      }
      expect(await claims.get(key(`k${k}`))).toMatchObject({ bodyHash: `h${k}` });
    }
  });

  it("a claim alone in its tick is the plain SET, with its TTL", async () => {
    const { claims, take, prefix } = await open();
    expect(await claims.claim(key("alone"), { bodyHash: "h", claimedAt: 1 })).toEqual({
      status: "claimed",
    });
    expect(take()).toEqual(["set"]);
    const ttl = await admin(url as string, (redis) => redis.pttl(claims.keyOf(key("alone"))));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(60_000);
    expect(claims.keyOf(key("alone")).startsWith(prefix)).toBe(true);
  });

  it("keys won in a batch carry the TTL; more than 256 in a tick split into bounded calls", async () => {
    const { claims, take } = await open();
    const results = await Promise.all(
      Array.from({ length: 300 }, (_, i) =>
        claims.claim(key(`n${i}`), { bodyHash: "h", claimedAt: i }),
      ),
    );
    expect(results.every((result) => result.status === "claimed")).toBe(true);
    expect(take()).toEqual(["evalsha", "evalsha"]);
    const ttls = await admin(url as string, (redis) =>
      Promise.all([0, 255, 256, 299].map((i) => redis.pttl(claims.keyOf(key(`n${i}`))))),
    );
    for (const ttl of ttls) {
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(60_000);
    }
  });

  it("a key that is not a claim fails its own caller closed; the batch's other callers keep their answers", async () => {
    const { claims } = await open();
    await admin(url as string, (redis) => redis.hset(claims.keyOf(key("odd")), "f", "v"));
    const results = await Promise.allSettled([
      claims.claim(key("a"), { bodyHash: "h", claimedAt: 1 }),
      claims.claim(key("odd"), { bodyHash: "h", claimedAt: 1 }),
      claims.claim(key("a"), { bodyHash: "h2", claimedAt: 2 }),
    ]);
    expect(results[0]).toEqual({ status: "fulfilled", value: { status: "claimed" } });
    expect(results[1]).toMatchObject({
      status: "rejected",
      reason: { code: "claim_store_unavailable" },
    });
    expect(results[2]).toMatchObject({ status: "fulfilled", value: { status: "already_claimed" } });
  });

  it("a reply of the wrong shape fails every caller closed, never claimed", async () => {
    const { claims, connection } = await open();
    connection.eval = async () => [0];
    const results = await Promise.allSettled([
      claims.claim(key("x"), { bodyHash: "h", claimedAt: 1 }),
      claims.claim(key("y"), { bodyHash: "h", claimedAt: 1 }),
    ]);
    for (const result of results) {
      expect(result).toMatchObject({
        status: "rejected",
        reason: { code: "claim_store_unavailable" },
      });
    }
  });

  it("claims and settles issued in the tick that closes the store are still sent", async () => {
    const { claims: reader, connection } = await open();
    expect(await reader.claim(key("held"), { bodyHash: "h", claimedAt: 1 })).toEqual({
      status: "claimed",
    });
    const closing = new RedisClaimStore(connection, 60_000, () => connection.close());
    const issued = [
      closing.claim(key("late-1"), { bodyHash: "h", claimedAt: 1 }),
      closing.claim(key("late-2"), { bodyHash: "h", claimedAt: 1 }),
      closing.settle(key("held"), { status: "dispatched", settledAt: 2 }),
    ];
    await closing.close();
    expect(await Promise.all(issued)).toEqual([
      { status: "claimed" },
      { status: "claimed" },
      undefined,
    ]);
    const held = await admin(url as string, (redis) => redis.get(reader.keyOf(key("held"))));
    expect(held).toContain('"status":"dispatched"');
  });

  it("a connection failure fails every caller of the batch with claim_store_unavailable", async () => {
    const { claims, connection } = await open();
    connection.redis.disconnect();
    const results = await Promise.allSettled(
      ["p", "q", "r"].map((id) => claims.claim(key(id), { bodyHash: "h", claimedAt: 1 })),
    );
    for (const result of results) {
      expect(result).toMatchObject({
        status: "rejected",
        reason: { code: "claim_store_unavailable" },
      });
    }
  });
});

suite("redis: bounded consumes issued in one tick", () => {
  it("one script call; the last uses go to exactly maxUses callers, in issue order", async () => {
    const { usage, take } = await open();
    const results = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        usage.tryConsume("ns", i % 2 === 0 ? "five" : "three", i % 2 === 0 ? 5 : 3),
      ),
    );
    expect(take()).toEqual(["evalsha"]);
    const five = results.filter((_, i) => i % 2 === 0);
    const three = results.filter((_, i) => i % 2 === 1);
    expect(five).toEqual([
      ...[1, 2, 3, 4, 5].map((used) => ({ consumed: true, used })),
      ...Array.from({ length: 10 }, () => ({ consumed: false, used: 5 })),
    ]);
    expect(three).toEqual([
      ...[1, 2, 3].map((used) => ({ consumed: true, used })),
      ...Array.from({ length: 12 }, () => ({ consumed: false, used: 3 })),
    ]);
    expect(await usage.getUsage("ns", "five")).toBe(5);
    expect(await usage.getUsage("ns", "three")).toBe(3);
  });

  it("a consume alone in its tick is the plain consume script", async () => {
    const { usage, take } = await open();
    expect(await usage.tryConsume("ns", "g", 1)).toEqual({ consumed: true, used: 1 });
    expect(await usage.tryConsume("ns", "g", 1)).toEqual({ consumed: false, used: 1 });
    expect(take()).toEqual(["evalsha", "evalsha"]);
  });

  it("two connections bursting on one grant together spend exactly maxUses", async () => {
    const first = await open();
    const second = await open(first.prefix);
    const burst = (usage: RedisUsageStore) =>
      Promise.all(Array.from({ length: 100 }, () => usage.tryConsume("ns", "shared", 37)));
    const rounds: ConsumeResult[][] = [];
    for (let round = 0; round < 3; round++) {
      rounds.push(...(await Promise.all([burst(first.usage), burst(second.usage)])));
    }
    const spent = rounds.flat().filter((result) => result.consumed);
    expect(spent.map((result) => result.used).sort((a, b) => a - b)).toEqual(
      Array.from({ length: 37 }, (_, i) => i + 1),
    );
    expect(await first.usage.getUsage("ns", "shared")).toBe(37);
  });

  it("a counter that is not an integer fails its own caller closed; the others keep their answers", async () => {
    const { usage } = await open();
    await admin(url as string, (redis) => redis.set(usage.keyOf("ns", "bad"), "1.5"));
    const results = await Promise.allSettled([
      usage.tryConsume("ns", "good", 1),
      usage.tryConsume("ns", "bad", 10),
      usage.tryConsume("ns", "good", 1),
    ]);
    expect(results[0]).toEqual({ status: "fulfilled", value: { consumed: true, used: 1 } });
    expect(results[1]).toMatchObject({
      status: "rejected",
      reason: { code: "usage_store_unavailable" },
    });
    expect(results[2]).toEqual({ status: "fulfilled", value: { consumed: false, used: 1 } });
    expect(await admin(url as string, (redis) => redis.get(usage.keyOf("ns", "bad")))).toBe("1.5");
  });

  it("a connection failure fails every caller of the batch with usage_store_unavailable", async () => {
    const { usage, connection } = await open();
    connection.redis.disconnect();
    const results = await Promise.allSettled(
      ["a", "b"].map((grant) => usage.tryConsume("ns", grant, 3)),
    );
    for (const result of results) {
      expect(result).toMatchObject({
        status: "rejected",
        reason: { code: "usage_store_unavailable" },
      });
    }
  });
});
