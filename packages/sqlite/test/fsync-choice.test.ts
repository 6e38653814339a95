/**
 * When a batch that needs its flush defers the fsync to the thread pool and when it commits at
 * FULL on the spot (group-commit.ts, `#defers`): deferring pays only when other callers'
 * batches commit during the fsync. The connection is faked here so each batch's choice can be
 * read exactly: `unflushed` is called for a deferred batch, never for one committed on the spot.
 */
import { describe, expect, it } from "vitest";
import { GroupCommit } from "../src/group-commit.js";

function harness() {
  /** One entry per batch committed, in order. */
  const choices: ("deferred" | "on the spot")[] = [];
  let inUnflushed = false;
  let waiting = 0;
  let overlapped = 0;
  const committing = (work: () => unknown) => {
    choices.push(inUnflushed ? "deferred" : "on the spot");
    return work();
  };
  const commit = new GroupCommit(
    committing,
    committing,
    (run) => {
      inUnflushed = true;
      try {
        return run();
      } finally {
        inUnflushed = false;
      }
    },
    () => {
      if (waiting > 0) overlapped++;
      waiting++;
      // The thread pool's round trip: the callback comes on a later turn of the loop.
      return new Promise<void>((resolve) =>
        setImmediate(() => {
          waiting--;
          resolve();
        }),
      );
    },
  );
  const write = (tag: string) => commit.enqueue("store_unavailable", () => tag);
  return { choices, write, overlapped: () => overlapped };
}

describe("SQLite group commit: where the fsync of a flushed batch runs", () => {
  it("a caller alone: three deferred fsyncs teach it, then on the spot, one probe in 16", async () => {
    const { choices, write } = harness();
    for (let i = 0; i < 35; i++) await write(`w${i}`);
    const deferred = choices.flatMap((choice, i) => (choice === "deferred" ? [i + 1] : []));
    expect(choices).toHaveLength(35);
    expect(deferred).toEqual([1, 2, 3, 19, 35]);
  });

  it("company during a wait: deferring starts over, and lasts while batches overlap", async () => {
    const { choices, write, overlapped } = harness();
    for (let i = 0; i < 10; i++) await write(`w${i}`);
    expect(choices.slice(3, 10)).toEqual(Array(7).fill("on the spot"));
    // Callers arriving one turn of the loop apart, each writing again once answered: the
    // probe's fsync is overlapped by another batch, and from then on every batch defers.
    const before = choices.length;
    let next = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < 200) {
          const tag = `c${next++}`;
          await new Promise((resolve) => setImmediate(resolve));
          await write(tag);
        }
      }),
    );
    const burst = choices.slice(before);
    const firstDeferred = burst.indexOf("deferred");
    expect(firstDeferred).toBeGreaterThanOrEqual(0);
    expect(firstDeferred).toBeLessThan(16);
    expect(burst.slice(firstDeferred)).not.toContain("on the spot");
    expect(overlapped()).toBeGreaterThan(10);
    // Alone again: after three lonely fsyncs it commits on the spot.
    for (let i = 0; i < 5; i++) await write(`again${i}`);
    expect(choices.slice(-2)).toEqual(["on the spot", "on the spot"]);
  });
});
