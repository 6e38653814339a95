import type { GrantUsageStore } from "@tessera/core";
import { describe, expect } from "vitest";
import { expectCode, resultOrCode } from "./errors.js";
import { type OpenedStore, type StoreFactory, suiteCases } from "./factory.js";
import { COLLIDING_PAIRS, HOSTILE_KEYS, oversize } from "./hostile.js";
import { raceInProcesses } from "./processes.js";

const UNAVAILABLE = ["usage_store_unavailable"];
const PROCESSES = 8;
const OPS_PER_PROCESS = 1000;
const CARVE_ROUNDS = 4;

type ManyFn = NonNullable<GrantUsageStore["tryConsumeMany"]>;

/** Every shipped store carves; a store without the primitive fails here, by name. */
function manyOf(store: GrantUsageStore): ManyFn {
  expect(typeof store.tryConsumeMany, "the store implements tryConsumeMany").toBe("function");
  return (store.tryConsumeMany as ManyFn).bind(store);
}

type ReleaseFn = NonNullable<GrantUsageStore["release"]>;

/** Every shipped store gives uses back; a store without the primitive fails here, by name. */
function releaseOf(store: GrantUsageStore): ReleaseFn {
  expect(typeof store.release, "the store implements release").toBe("function");
  return (store.release as ReleaseFn).bind(store);
}

/**
 * The uses each success owns, `(used - count, used]`, must not overlap and must fill 1..total
 * with no gap: two spends that shared a use, or a carve that spent part of itself, would show.
 * Returns the total.
 */
function expectDisjointSpans(spans: readonly (readonly [number, number])[]): number {
  const sorted = [...spans].sort((a, b) => a[0] - b[0]);
  let end = 0;
  for (const [used, count] of sorted) {
    expect(used - count, `a spend of ${count} ending at ${used} overlaps or leaves a gap`).toBe(
      end,
    );
    end = used;
  }
  return end;
}

/**
 * The `GrantUsageStore` contract: counts start at zero, `tryConsume` is atomic and never
 * passes its bound, in one process (64 concurrent callers) and across 8 OS processes; an
 * outage fails closed and spends nothing twice; hostile keys stay apart.
 */
export function describeUsageStoreConformance<H extends OpenedStore<GrantUsageStore>>(
  name: string,
  factory: StoreFactory<GrantUsageStore, H>,
): void {
  const { use, check, crossProcess, skipNote, outageCase, outageNote } = suiteCases(factory);

  describe(`GrantUsageStore conformance: ${name}`, () => {
    check("counts start at zero and a bounded consume stops at its bound", () =>
      use(async ({ store }) => {
        expect(await store.getUsage("ns", "g")).toBe(0);
        const results = [];
        for (let i = 0; i < 4; i++) results.push(await store.tryConsume("ns", "g", 3));
        expect(results).toEqual([
          { consumed: true, used: 1 },
          { consumed: true, used: 2 },
          { consumed: true, used: 3 },
          { consumed: false, used: 3 },
        ]);
        expect(await store.getUsage("ns", "g")).toBe(3);
      }),
    );

    check(
      "counts past what a small column holds (255, 65,535): 70,000 uses in bulk, then one by one",
      () =>
        use(async ({ store }) => {
          // One by one past 255 (a TINYINT UNSIGNED counter clamps there and then allows for ever).
          for (let i = 1; i <= 300; i++) {
            expect(await store.tryConsume("ns", "wide", 300)).toEqual({ consumed: true, used: i });
          }
          expect(await store.tryConsume("ns", "wide", 300)).toEqual({ consumed: false, used: 300 });
          expect(await store.getUsage("ns", "wide")).toBe(300);
          // Past 65,535 in a few carves, where the store has them (a SMALLINT would clamp).
          if (store.tryConsumeMany !== undefined) {
            for (let i = 0; i < 7; i++) await store.tryConsumeMany("ns", "wider", 10_000, 100_000);
            expect(await store.getUsage("ns", "wider")).toBe(70_000);
            expect(await store.tryConsume("ns", "wider", 70_001)).toEqual({
              consumed: true,
              used: 70_001,
            });
          }
        }),
    );

    check("keeps grants and namespaces apart", () =>
      use(async ({ store }) => {
        await store.tryConsume("ns-a", "g", 5);
        await store.tryConsume("ns-a", "g", 5);
        await store.tryConsume("ns-b", "g", 5);
        await store.tryConsume("ns-a", "h", 5);
        expect(await store.getUsage("ns-a", "g")).toBe(2);
        expect(await store.getUsage("ns-b", "g")).toBe(1);
        expect(await store.getUsage("ns-a", "h")).toBe(1);
        expect(await store.getUsage("ns-b", "h")).toBe(0);
      }),
    );

    check("a raised bound lets consumption continue from the recorded count", () =>
      use(async ({ store }) => {
        await store.tryConsume("ns", "g", 1);
        expect(await store.tryConsume("ns", "g", 1)).toEqual({ consumed: false, used: 1 });
        expect(await store.tryConsume("ns", "g", 2)).toEqual({ consumed: true, used: 2 });
      }),
    );

    // Every store refuses the same calls: a bound of 0 was once "not consumed" in some stores
    // and invalid_input in others.
    check("refuses a bound that is not a positive whole number with invalid_input", () =>
      use(async ({ store }) => {
        for (const bad of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, "2" as unknown]) {
          await expectCode(() => store.tryConsume("ns", "g", bad as number), ["invalid_input"]);
        }
        expect(await store.getUsage("ns", "g")).toBe(0);
      }),
    );

    check("refuses namespace and grant IDs that are not strings with invalid_input", () =>
      use(async ({ store }) => {
        for (const [ns, id] of [
          [1, "g"],
          ["ns", null],
          [undefined, "g"],
          ["ns", { toString: () => "g" }],
        ] as [string, string][]) {
          await expectCode(() => store.tryConsume(ns, id, 5), ["invalid_input"]);
          await expectCode(() => store.getUsage(ns, id), ["invalid_input"]);
        }
        expect(await store.getUsage("ns", "g")).toBe(0);
      }),
    );

    check("64 concurrent callers in one process: exactly maxUses succeed, each count once", () =>
      use(async ({ store }) => {
        const results = await Promise.all(
          Array.from({ length: 64 }, () => store.tryConsume("ns", "hot", 10)),
        );
        const won = results.filter((r) => r.consumed).map((r) => r.used);
        expect(won.sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        for (const r of results.filter((r) => !r.consumed)) expect(r.used).toBe(10);
        expect(await store.getUsage("ns", "hot")).toBe(10);
      }),
    );

    check("64 concurrent callers on 64 grants: every grant counts exactly one", () =>
      use(async ({ store }) => {
        const ids = Array.from({ length: 64 }, (_, i) => `g-${i}`);
        const results = await Promise.all(ids.map((id) => store.tryConsume("ns", id, 1)));
        expect(results.every((r) => r.consumed && r.used === 1)).toBe(true);
        const usage = await Promise.all(ids.map((id) => store.getUsage("ns", id)));
        expect(usage).toEqual(ids.map(() => 1));
      }),
    );

    check("hostile namespace and grant IDs are counted apart and never collide", () =>
      use(async ({ store }) => {
        for (const [index, key] of HOSTILE_KEYS.entries()) {
          for (let i = 0; i <= index % 3; i++) await store.tryConsume(key, key, 100);
        }
        for (const [index, key] of HOSTILE_KEYS.entries()) {
          expect(await store.getUsage(key, key)).toBe((index % 3) + 1);
        }
        // A key and its prefix before a NUL are different grants.
        expect(await store.getUsage("a", "a")).toBe(0);
        for (const [ns, id] of COLLIDING_PAIRS.slice(0, 2)) await store.tryConsume(ns, id, 9);
        expect(await store.getUsage("a", "b:c")).toBe(1);
        expect(await store.getUsage("a:b", "c")).toBe(1);
        expect(await store.getUsage("a/b", "c")).toBe(0);
      }),
    );

    check(
      "an oversize (1 MiB) grant ID is counted or refused with invalid_input, never merged",
      () =>
        use(async ({ store }) => {
          const big = oversize();
          const outcome = await resultOrCode(
            () => store.tryConsume("ns", big, 2),
            ["invalid_input"],
          );
          if (outcome.ok) {
            expect(outcome.value).toEqual({ consumed: true, used: 1 });
            expect(await store.getUsage("ns", big)).toBe(1);
          }
          // Neither a truncated nor a neighbouring key was touched.
          expect(await store.getUsage("ns", big.slice(0, 1000))).toBe(0);
          expect(await store.getUsage("ns", `${big}y`)).toBe(0);
          expect(await store.tryConsume("ns", "after", 1)).toEqual({ consumed: true, used: 1 });
        }),
    );

    crossProcess(
      `${PROCESSES} OS processes x ${OPS_PER_PROCESS} consumes of one grant (maxUses 100): exactly 100 succeed${skipNote}`,
      () =>
        use(async (opened) => {
          const spec = factory.processSpec?.(opened);
          if (!spec) throw new Error("unreachable: guarded by processSpec");
          const results = await raceInProcesses(spec, PROCESSES, () => ({
            kind: "consume",
            namespaceId: "ns-race",
            grantId: "hot",
            maxUses: 100,
            times: OPS_PER_PROCESS,
          }));
          const consumedAt = results.flatMap((r) => (r.kind === "consume" ? r.consumedAt : []));
          const refused = results.reduce((n, r) => n + (r.kind === "consume" ? r.refused : 0), 0);
          expect(consumedAt.length).toBe(100);
          expect(refused).toBe(PROCESSES * OPS_PER_PROCESS - 100);
          // Every count from 1 to 100 was handed out exactly once.
          expect(new Set(consumedAt).size).toBe(100);
          expect(Math.min(...consumedAt)).toBe(1);
          expect(Math.max(...consumedAt)).toBe(100);
          expect(await opened.store.getUsage("ns-race", "hot")).toBe(100);
        }),
    );

    check("release gives one use back, atomically, never below zero", () =>
      use(async ({ store }) => {
        const release = releaseOf(store);
        // Nothing recorded yet: nothing to give back, and no row is made at -1.
        expect(await release("ns", "r")).toEqual({ released: false, used: 0 });
        expect(await store.getUsage("ns", "r")).toBe(0);
        expect(await store.tryConsume("ns", "r", 1)).toEqual({ consumed: true, used: 1 });
        expect(await store.tryConsume("ns", "r", 1)).toEqual({ consumed: false, used: 1 });
        // The single-use ticket given back is spendable again, once.
        expect(await release("ns", "r")).toEqual({ released: true, used: 0 });
        expect(await store.tryConsume("ns", "r", 1)).toEqual({ consumed: true, used: 1 });
        expect(await store.tryConsume("ns", "r", 1)).toEqual({ consumed: false, used: 1 });
        // Another grant and another namespace are untouched.
        await store.tryConsume("ns", "other", 5);
        await store.tryConsume("ns2", "r", 5);
        await release("ns", "r");
        expect(await store.getUsage("ns", "other")).toBe(1);
        expect(await store.getUsage("ns2", "r")).toBe(1);
        await expectCode(() => release(1 as unknown as string, "r"), ["invalid_input"]);
      }),
    );

    check("64 concurrent releases of 5 uses give back exactly 5, racing consumes too", () =>
      use(async ({ store }) => {
        const release = releaseOf(store);
        for (let i = 0; i < 5; i++) await store.tryConsume("ns", "rr", 10);
        const results = await Promise.all(Array.from({ length: 64 }, () => release("ns", "rr")));
        expect(results.filter((r) => r.released)).toHaveLength(5);
        expect(await store.getUsage("ns", "rr")).toBe(0);
        // Releases and consumes racing on one grant: the count ends where their sum says.
        const mixed = await Promise.all(
          Array.from({ length: 64 }, (_, i) =>
            i % 2 === 0
              ? store.tryConsume("ns", "rr", 10).then((r) => (r.consumed ? 1 : 0))
              : release("ns", "rr").then((r) => (r.released ? -1 : 0)),
          ),
        );
        const net = mixed.reduce<number>((sum, step) => sum + step, 0);
        expect(await store.getUsage("ns", "rr")).toBe(net);
      }),
    );

    check("tryConsumeMany spends all of its uses or none, against tryConsume too", () =>
      use(async ({ store }) => {
        const many = manyOf(store);
        expect(await many("ns", "p", 3, 10)).toEqual({ consumed: true, used: 3 });
        expect(await store.tryConsume("ns", "p", 10)).toEqual({ consumed: true, used: 4 });
        // Six left: seven is refused whole, nothing is spent; six fits exactly.
        expect(await many("ns", "p", 7, 10)).toEqual({ consumed: false, used: 4 });
        expect(await many("ns", "p", 6, 10)).toEqual({ consumed: true, used: 10 });
        expect(await many("ns", "p", 1, 10)).toEqual({ consumed: false, used: 10 });
        // More than the bound never fits, even on a fresh grant.
        expect(await many("ns", "fresh", 11, 10)).toEqual({ consumed: false, used: 0 });
        expect(await store.getUsage("ns", "fresh")).toBe(0);
        for (const bad of [0, -1, 1.5, Number.NaN, "2" as unknown]) {
          await expectCode(() => many("ns", "p", bad as number, 10), ["invalid_input"]);
          await expectCode(() => many("ns", "q", 2, bad as number), ["invalid_input"]);
        }
        expect(await store.getUsage("ns", "q")).toBe(0);
      }),
    );

    check("64 concurrent carves and spends in one process: disjoint, never past the bound", () =>
      use(async ({ store }) => {
        const many = manyOf(store);
        const counts = Array.from({ length: 64 }, (_, i) => (i % 5) + 1);
        const results = await Promise.all(
          counts.map((count) =>
            count === 1 ? store.tryConsume("ns", "carved", 50) : many("ns", "carved", count, 50),
          ),
        );
        const spans = results.flatMap((r, i) =>
          r.consumed ? [[r.used, counts[i] as number] as [number, number]] : [],
        );
        const total = expectDisjointSpans(spans);
        expect(total).toBeLessThanOrEqual(50);
        expect(await store.getUsage("ns", "carved")).toBe(total);
      }),
    );

    crossProcess(
      `${PROCESSES} OS processes x ${CARVE_ROUNDS} rounds of carves (2-5 uses) and single spends on one parent (maxUses 100): uses never exceed it${skipNote}`,
      () =>
        use(async (opened) => {
          const spec = factory.processSpec?.(opened);
          if (!spec) throw new Error("unreachable: guarded by processSpec");
          const grantIds = Array.from({ length: CARVE_ROUNDS }, (_, round) => `parent-${round}`);
          const results = await raceInProcesses(spec, PROCESSES, (index) => ({
            kind: "carve",
            namespaceId: "ns-carve",
            grantIds,
            maxUses: 100,
            // Mostly carves, then single spends so every round ends fully spent.
            counts: Array.from({ length: 60 }, (_, i) =>
              i < 40 ? ((i * 7 + index * 3) % 5) + 1 : 1,
            ),
          }));
          for (const [round, grantId] of grantIds.entries()) {
            const spans = results.flatMap((r) =>
              r.kind === "carve" ? (r.spans[round] ?? []) : [],
            );
            // Each success owns the uses (used - count, used]: disjoint, and together 1..100.
            expect(expectDisjointSpans(spans)).toBe(100);
            expect(spans.some(([, count]) => count > 1)).toBe(true);
            expect(await opened.store.getUsage("ns-carve", grantId)).toBe(100);
          }
        }),
    );

    outageCase(`outage: fails closed with usage_store_unavailable, recovers${outageNote}`, () =>
      use(async (opened) => {
        const outage = factory.outage?.(opened);
        if (!outage) throw new Error("unreachable: guarded by outage");
        const { store } = opened;
        await store.tryConsume("ns", "g", 10);
        await store.tryConsume("ns", "g", 10);
        await outage.interrupt();
        let succeeded = 2;
        let failed = 0;
        try {
          for (let i = 0; i < 5; i++) {
            if (outage.kind === "blip") {
              const outcome = await resultOrCode(
                () => store.tryConsume("ns", "g", 10),
                UNAVAILABLE,
              );
              if (outcome.ok && outcome.value.consumed) succeeded++;
              if (!outcome.ok) failed++;
            } else {
              await expectCode(() => store.tryConsume("ns", "g", 10), UNAVAILABLE);
              await expectCode(() => store.getUsage("ns", "g"), UNAVAILABLE);
            }
          }
        } finally {
          await outage.restore();
        }
        const used = await store.getUsage("ns", "g");
        // A failed call may have landed before the reply was lost, but nothing counts twice.
        expect(used).toBeGreaterThanOrEqual(succeeded);
        expect(used).toBeLessThanOrEqual(succeeded + failed);
        let more = 0;
        for (let i = 0; i < 12; i++) if ((await store.tryConsume("ns", "g", 10)).consumed) more++;
        expect(more).toBe(10 - used);
        expect(await store.getUsage("ns", "g")).toBe(10);
      }),
    );

    outageCase(`outage mid-run: concurrent consumes never exceed the bound${outageNote}`, () =>
      use(async (opened) => {
        const outage = factory.outage?.(opened);
        if (!outage) throw new Error("unreachable: guarded by outage");
        const { store } = opened;
        const attempts = Array.from({ length: 64 }, (_, i) =>
          resultOrCode(async () => {
            if (i === 16) await outage.interrupt();
            return store.tryConsume("ns", "mid", 40);
          }, UNAVAILABLE),
        );
        const outcomes = await Promise.all(attempts);
        await outage.restore();
        const won = outcomes.filter((o) => o.ok && o.value.consumed).length;
        const failed = outcomes.filter((o) => !o.ok).length;
        const used = await store.getUsage("ns", "mid");
        expect(used).toBeLessThanOrEqual(40);
        expect(used).toBeGreaterThanOrEqual(won);
        expect(used).toBeLessThanOrEqual(won + failed);
        const after = await store.tryConsume("ns", "mid", 40);
        expect(after.used).toBe(Math.min(40, used + 1));
      }),
    );
  });
}
