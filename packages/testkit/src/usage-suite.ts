import type { GrantUsageStore } from "@tessera/core";
import { describe, expect } from "vitest";
import { expectCode, resultOrCode } from "./errors.js";
import { type OpenedStore, type StoreFactory, suiteCases } from "./factory.js";
import { COLLIDING_PAIRS, HOSTILE_KEYS, oversize } from "./hostile.js";
import { raceInProcesses } from "./processes.js";

const UNAVAILABLE = ["usage_store_unavailable"];
const PROCESSES = 8;
const OPS_PER_PROCESS = 1000;

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
