import { serviceUrl } from "@tessera/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { openTestStores } from "./support/redis-test-stores.js";

/**
 * Settles issued in one tick leave as one script call, and claims in one tick as one socket
 * write: each caller must still get exactly its own answer, as if sent one by one.
 */
const url = serviceUrl("TESSERA_REDIS_URL");
const suite = url ? describe : describe.skip;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

suite("redis claims sent together", () => {
  it("settles in one tick: each key its own answer; a missing key refused for its caller only; the first outcome stands", async () => {
    const opened = await openTestStores(url as string);
    cleanups.push(opened.close);
    const { stores } = opened;
    const key = (id: string) => ({ session: "batch", functionCallId: id });
    for (const id of ["a", "b", "c"]) {
      expect(await stores.claims.claim(key(id), { bodyHash: "h", claimedAt: 1 })).toEqual({
        status: "claimed",
      });
    }
    await stores.claims.settle(key("c"), { status: "denied", settledAt: 2 });
    const results = await Promise.allSettled([
      stores.claims.settle(key("a"), { status: "dispatched", settledAt: 3 }),
      stores.claims.settle(key("missing"), { status: "dispatched", settledAt: 3 }),
      stores.claims.settle(key("b"), { status: "failed", settledAt: 4 }),
      stores.claims.settle(key("a"), { status: "denied", settledAt: 5 }),
      stores.claims.settle(key("c"), { status: "dispatched", settledAt: 6 }),
    ]);
    expect(results.map((r) => r.status)).toEqual([
      "fulfilled",
      "rejected",
      "fulfilled",
      "fulfilled",
      "fulfilled",
    ]);
    expect((results[1] as PromiseRejectedResult).reason).toMatchObject({ code: "invalid_input" });
    expect((await stores.claims.get(key("a")))?.receipt).toEqual({
      status: "dispatched",
      settledAt: 3,
    });
    expect((await stores.claims.get(key("b")))?.receipt).toEqual({
      status: "failed",
      settledAt: 4,
    });
    expect((await stores.claims.get(key("c")))?.receipt).toEqual({
      status: "denied",
      settledAt: 2,
    });
    expect(await stores.claims.get(key("missing"))).toBeUndefined();
  });

  it("settles in one tick with answers: each key keeps its own answer, the first settle's", async () => {
    const opened = await openTestStores(url as string);
    cleanups.push(opened.close);
    const { stores } = opened;
    const key = (id: string) => ({ session: "answers", functionCallId: id });
    for (const id of ["x", "y", "z"]) {
      await stores.claims.claim(key(id), { bodyHash: "h", claimedAt: 1 });
    }
    await Promise.all([
      stores.claims.settle(key("x"), { status: "dispatched", settledAt: 2 }, { reply: "x\ny" }),
      stores.claims.settle(key("y"), { status: "failed", settledAt: 2 }),
      stores.claims.settle(key("z"), { status: "dispatched", settledAt: 2 }, [1, { z: null }]),
      stores.claims.settle(key("x"), { status: "failed", settledAt: 3 }, { reply: "later" }),
    ]);
    expect(await stores.claims.get(key("x"))).toMatchObject({
      receipt: { status: "dispatched", settledAt: 2 },
      answer: { reply: "x\ny" },
    });
    const y = await stores.claims.get(key("y"));
    expect(y?.receipt).toEqual({ status: "failed", settledAt: 2 });
    expect(y && "answer" in y).toBe(false);
    expect((await stores.claims.get(key("z")))?.answer).toEqual([1, { z: null }]);
    expect(await stores.claims.claim(key("z"), { bodyHash: "h2", claimedAt: 4 })).toMatchObject({
      status: "already_claimed",
      existing: { answer: [1, { z: null }] },
    });
  });

  it("claims in one tick: one winner per key, the losers read the winner's record", async () => {
    const opened = await openTestStores(url as string);
    cleanups.push(opened.close);
    const { stores } = opened;
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        stores.claims.claim(
          { session: "batch", functionCallId: `k${i % 10}` },
          { bodyHash: `h${i}`, claimedAt: i },
        ),
      ),
    );
    for (let k = 0; k < 10; k++) {
      const mine = results.filter((_, i) => i % 10 === k);
      expect(mine[0]).toEqual({ status: "claimed" });
      for (const later of mine.slice(1)) {
        expect(later).toMatchObject({
          status: "already_claimed",
          existing: { functionCallId: `k${k}`, bodyHash: `h${k}` },
        });
      }
    }
  });
});
