import { describe, expect, it } from "vitest";
import { GroupSync } from "./group-sync.js";

/** A sync that records when each run started and finishes only when told to. */
function controlledSync() {
  const runs: Array<{ startedAt: number; finish: () => void; fail: (e: unknown) => void }> = [];
  let clock = 0;
  const sync = () =>
    new Promise<void>((resolve, reject) => {
      runs.push({ startedAt: ++clock, finish: resolve, fail: reject });
    });
  return { runs, sync, tick: () => ++clock };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe("GroupSync", () => {
  it("releases each caller only after a sync that started after it asked", async () => {
    const { runs, sync, tick } = controlledSync();
    const group = new GroupSync(sync);
    const released: number[] = [];
    const first = group.request().then(() => released.push(1));
    await settle();
    expect(runs).toHaveLength(1); // the first request starts a sync at once

    const askedAt = tick();
    const second = group.request().then(() => released.push(2));
    const third = group.request().then(() => released.push(3));
    runs[0]?.finish();
    await first;
    await settle();
    // 2 and 3 asked while sync 1 ran: sync 1 does not cover them; one new sync covers both.
    expect(released).toEqual([1]);
    expect(runs).toHaveLength(2);
    expect(runs[1]?.startedAt).toBeGreaterThan(askedAt);

    runs[1]?.finish();
    await Promise.all([second, third]);
    expect(released).toEqual([1, 2, 3]);
    expect(runs).toHaveLength(2);
  });

  it("runs no sync while nobody asks, and one per batch under a burst", async () => {
    const { runs, sync } = controlledSync();
    const group = new GroupSync(sync);
    await settle();
    expect(runs).toHaveLength(0);
    const burst = Array.from({ length: 50 }, () => group.request());
    await settle();
    runs[0]?.finish(); // covers only the first request
    await settle();
    runs[1]?.finish(); // covers the other 49
    await Promise.all(burst);
    expect(runs).toHaveLength(2);
  });

  it("rejects every caller of a failed sync, and recovers for the next batch", async () => {
    const { runs, sync } = controlledSync();
    const group = new GroupSync(sync);
    const failed = group.request();
    await settle();
    runs[0]?.fail(new Error("EIO"));
    await expect(failed).rejects.toThrow("EIO");
    const next = group.request();
    await settle();
    runs[1]?.finish();
    await expect(next).resolves.toBeUndefined();
  });
});
