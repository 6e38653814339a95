import { createHash } from "node:crypto";
import type { ClaimKey, ClaimRecord, ClaimStore } from "@tessera/core";
import { expect } from "vitest";
import { expectCode, resultOrCode } from "./errors.js";
import { type OpenedStore, type StoreFactory, suiteCases } from "./factory.js";
import { raceInProcesses, WorkerProcess } from "./processes.js";

const UNAVAILABLE = ["claim_store_unavailable"];
const PROCESSES = 8;
const KEYS_PER_RACE = 1000;

/** The record every claim case stores; its body hash is what a retry is compared by. */
export function record(body: string, worker = "conformance"): ClaimRecord {
  return {
    bodyHash: createHash("sha256").update(body).digest("hex"),
    claimedAt: 1_700_000_000_000,
    worker,
  };
}

/**
 * The claim cases that reach past this process: OS processes racing for keys, a worker
 * killed between claim and settle, and an outage of the backing service.
 * Declared inside `describeClaimStoreConformance`'s block, after its in-process cases; each
 * is skipped, with the reason in its title, when the factory lacks the hook it needs.
 */
export function describeClaimProcessAndOutageCases<H extends OpenedStore<ClaimStore>>(
  factory: StoreFactory<ClaimStore, H>,
): void {
  const { use, crossProcess, skipNote, outageCase, outageNote } = suiteCases(factory);

  crossProcess(
    `${PROCESSES} OS processes race for ${KEYS_PER_RACE} keys: each key claimed by exactly one${skipNote}`,
    () =>
      use(async (opened) => {
        const spec = factory.processSpec?.(opened);
        if (!spec) throw new Error("unreachable: guarded by processSpec");
        const keys = Array.from({ length: KEYS_PER_RACE }, (_, i) => ({
          session: "race",
          functionCallId: `call-${i}`,
        }));
        const results = await raceInProcesses(spec, PROCESSES, (index) => ({
          kind: "claimAll",
          keys,
          record: record("race", `p${index}`),
          reverse: index % 2 === 1,
        }));
        const owner = new Map<number, number>();
        results.forEach((result, worker) => {
          if (result.kind !== "claimAll") return;
          expect(result.won.length + result.lost).toBe(KEYS_PER_RACE);
          for (const index of result.won) {
            expect(owner.has(index)).toBe(false);
            owner.set(index, worker);
          }
        });
        expect(owner.size).toBe(KEYS_PER_RACE);
        // The stored record is the winner's, for every key.
        for (const [index, worker] of owner) {
          expect((await opened.store.get(keys[index] as ClaimKey))?.worker).toBe(`p${worker}`);
        }
      }),
  );

  crossProcess(
    `kill -9 between claim and settle: the claim survives and reads in doubt${skipNote}`,
    () =>
      use(async (opened) => {
        const spec = factory.processSpec?.(opened);
        if (!spec) throw new Error("unreachable: guarded by processSpec");
        const key = { session: "crash", functionCallId: "victim" };
        const worker = await WorkerProcess.start(spec);
        try {
          worker.run({ kind: "claimAndHang", key, record: record("victim", "doomed") });
          await worker.expect("claimed");
        } finally {
          await worker.killHard();
        }
        expect(await opened.store.get(key)).toEqual({ ...key, ...record("victim", "doomed") });
        expect(await opened.store.listInDoubt("crash")).toEqual([
          { ...key, ...record("victim", "doomed") },
        ]);
        const retry = await opened.store.claim(key, record("victim", "restarted"));
        expect(retry.status).toBe("already_claimed");
        // A fresh process sees the same: the claim outlived its worker, not just a cache.
        const [late] = await raceInProcesses(spec, 1, () => ({
          kind: "claimAll",
          keys: [key],
          record: record("victim", "late"),
          reverse: false,
        }));
        expect(late).toEqual({ kind: "claimAll", won: [], lost: 1 });
      }),
  );

  outageCase(`outage: fails closed with claim_store_unavailable, recovers${outageNote}`, () =>
    use(async (opened) => {
      const outage = factory.outage?.(opened);
      if (!outage) throw new Error("unreachable: guarded by outage");
      const { store } = opened;
      const before = { session: "s", functionCallId: "before" };
      const during = { session: "s", functionCallId: "during" };
      await store.claim(before, record("b"));
      await outage.interrupt();
      let claimedDuring = 0;
      try {
        for (let i = 0; i < 3; i++) {
          if (outage.kind === "blip") {
            const outcome = await resultOrCode(() => store.claim(during, record("d")), UNAVAILABLE);
            if (outcome.ok && outcome.value.status === "claimed") claimedDuring++;
          } else {
            await expectCode(() => store.claim(during, record("d")), UNAVAILABLE);
            await expectCode(() => store.claim(before, record("b")), UNAVAILABLE);
            await expectCode(() => store.get(before), UNAVAILABLE);
            await expectCode(() => store.listInDoubt(), UNAVAILABLE);
            await expectCode(
              () => store.settle(before, { status: "dispatched", settledAt: 1 }),
              UNAVAILABLE,
            );
          }
        }
      } finally {
        await outage.restore();
      }
      expect(claimedDuring).toBeLessThanOrEqual(1);
      expect((await store.claim(before, record("b"))).status).toBe("already_claimed");
      // The key tried during the outage is claimable at most once in total.
      const after = await store.claim(during, record("d"));
      expect(claimedDuring + (after.status === "claimed" ? 1 : 0)).toBeLessThanOrEqual(1);
      expect((await store.claim(during, record("d"))).status).toBe("already_claimed");
      await store.settle(before, { status: "dispatched", settledAt: 2 });
      expect((await store.get(before))?.receipt?.status).toBe("dispatched");
    }),
  );

  outageCase(
    `outage mid-run: concurrent claims of one key still have one winner${outageNote}`,
    () =>
      use(async (opened) => {
        const outage = factory.outage?.(opened);
        if (!outage) throw new Error("unreachable: guarded by outage");
        const { store } = opened;
        const key = { session: "s", functionCallId: "mid" };
        const outcomes = await Promise.all(
          Array.from({ length: 32 }, (_, i) =>
            resultOrCode(async () => {
              if (i === 8) await outage.interrupt();
              return store.claim(key, record(`${i}`));
            }, UNAVAILABLE),
          ),
        );
        await outage.restore();
        const winners = outcomes.filter((o) => o.ok && o.value.status === "claimed").length;
        expect(winners).toBeLessThanOrEqual(1);
        const after = await store.claim(key, record("after"));
        expect(winners + (after.status === "claimed" ? 1 : 0)).toBeLessThanOrEqual(1);
        expect(await store.get(key)).toBeDefined();
      }),
  );
}
