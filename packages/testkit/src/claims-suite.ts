import type { ClaimKey, ClaimRecord, ClaimStore } from "@tessera/core";
import { describe, expect } from "vitest";
import { describeClaimProcessAndOutageCases, record } from "./claims-processes.js";
import { expectCode, resultOrCode } from "./errors.js";
import { type OpenedStore, type StoreFactory, suiteCases } from "./factory.js";
import { COLLIDING_PAIRS, HOSTILE_KEYS, oversize } from "./hostile.js";

/** Sorted by (session, functionCallId) so two listings compare regardless of store order. */
function byKey<T extends ClaimKey>(claims: readonly T[]): T[] {
  const text = (c: ClaimKey) => JSON.stringify([c.session, c.functionCallId]);
  return [...claims].sort((a, b) => (text(a) < text(b) ? -1 : text(a) > text(b) ? 1 : 0));
}

/**
 * The `ClaimStore` contract: one atomic insert-if-absent per (session, functionCallId) that
 * hands back the existing record on conflict; settle/get/listInDoubt/endSession; one winner
 * per key under 64 concurrent callers and across 8 OS processes; a claim whose worker is
 * killed before settling survives and reads in doubt; an outage fails closed.
 */
export function describeClaimStoreConformance<H extends OpenedStore<ClaimStore>>(
  name: string,
  factory: StoreFactory<ClaimStore, H>,
): void {
  const { use, check } = suiteCases(factory);

  describe(`ClaimStore conformance: ${name}`, () => {
    check("claims once; a second claim is refused and carries the existing record", () =>
      use(async ({ store }) => {
        const key = { session: "s1", functionCallId: "call-1" };
        expect(await store.get(key)).toBeUndefined();
        expect(await store.claim(key, record("first", "w1"))).toEqual({ status: "claimed" });
        const again = await store.claim(key, record("changed body", "w2"));
        expect(again.status).toBe("already_claimed");
        if (again.status !== "already_claimed") return;
        expect(again.existing).toMatchObject({ ...key, ...record("first", "w1") });
        expect(again.existing.receipt).toBeUndefined();
        expect(await store.get(key)).toEqual(again.existing);
      }),
    );

    check("another trusted session may use the same functionCallId independently", () =>
      use(async ({ store }) => {
        const id = "shared-id";
        expect(await store.claim({ session: "a", functionCallId: id }, record("x"))).toEqual({
          status: "claimed",
        });
        expect(await store.claim({ session: "b", functionCallId: id }, record("x"))).toEqual({
          status: "claimed",
        });
      }),
    );

    check("settle records the receipt; settled claims leave the in-doubt list", () =>
      use(async ({ store }) => {
        const done = { session: "s", functionCallId: "done" };
        const open = { session: "s", functionCallId: "open" };
        const other = { session: "t", functionCallId: "open" };
        for (const key of [done, open, other]) await store.claim(key, record(key.functionCallId));
        await store.settle(done, { status: "dispatched", settledAt: 1_700_000_000_500 });
        expect(await store.get(done)).toMatchObject({
          ...done,
          receipt: { status: "dispatched", settledAt: 1_700_000_000_500 },
        });
        expect(byKey(await store.listInDoubt())).toEqual(
          byKey([
            { ...open, ...record("open") },
            { ...other, ...record("open") },
          ]),
        );
        expect(await store.listInDoubt("s")).toEqual([{ ...open, ...record("open") }]);
        expect(await store.listInDoubt("nobody")).toEqual([]);
        // A settled claim still refuses a retry and shows its outcome.
        const retry = await store.claim(done, record("done"));
        expect(retry.status === "already_claimed" && retry.existing.receipt?.status).toBe(
          "dispatched",
        );
      }),
    );

    check("settle keeps the first outcome and refuses a key that was never claimed", () =>
      use(async ({ store }) => {
        const key = { session: "s", functionCallId: "f" };
        await store.claim(key, record("f"));
        await store.settle(key, { status: "failed", settledAt: 2 });
        await store.settle(key, { status: "dispatched", settledAt: 3 });
        expect((await store.get(key))?.receipt).toEqual({ status: "failed", settledAt: 2 });
        await expectCode(
          () =>
            store.settle(
              { session: "s", functionCallId: "never" },
              { status: "failed", settledAt: 1 },
            ),
          ["invalid_input"],
        );
        await expectCode(
          () => store.settle(key, { status: "none" as "failed", settledAt: 1 }),
          ["invalid_input"],
        );
      }),
    );

    check("refuses a malformed key, record, receipt or session with invalid_input", () =>
      use(async ({ store }) => {
        const key = { session: "s", functionCallId: "f" };
        const good = record("f");
        const badKeys = [null, { session: 1, functionCallId: "f" }, { session: "s" }];
        for (const bad of badKeys as unknown as ClaimKey[]) {
          await expectCode(() => store.claim(bad, good), ["invalid_input"]);
          await expectCode(() => store.get(bad), ["invalid_input"]);
          await expectCode(
            () => store.settle(bad, { status: "failed", settledAt: 1 }),
            ["invalid_input"],
          );
        }
        const badRecords = [
          null,
          { bodyHash: 7, claimedAt: 1 },
          { bodyHash: "h", claimedAt: 1.5 },
          { bodyHash: "h", claimedAt: "1" },
          { bodyHash: "h", claimedAt: 1, worker: 5 },
        ];
        for (const bad of badRecords as unknown as ClaimRecord[]) {
          await expectCode(() => store.claim(key, bad), ["invalid_input"]);
        }
        expect(await store.get(key)).toBeUndefined();
        await store.claim(key, good);
        for (const settledAt of [1.5, Number.NaN, "1" as unknown as number]) {
          await expectCode(
            () => store.settle(key, { status: "dispatched", settledAt }),
            ["invalid_input"],
          );
        }
        expect((await store.get(key))?.receipt).toBeUndefined();
        for (const session of [42, null, {}] as unknown as string[]) {
          await expectCode(() => store.listInDoubt(session), ["invalid_input"]);
          await expectCode(() => store.endSession(session), ["invalid_input"]);
        }
        expect(await store.listInDoubt()).toEqual([{ ...key, ...good }]);
      }),
    );

    check("listInDoubt lists the oldest claim first, per session or across all", () =>
      use(async ({ store }) => {
        const at = (claimedAt: number) => ({ ...record("b"), claimedAt });
        await store.claim({ session: "a", functionCallId: "late" }, at(30));
        await store.claim({ session: "b", functionCallId: "1" }, at(20));
        await store.claim({ session: "a", functionCallId: "early" }, at(10));
        const ids = (claims: readonly ClaimKey[]) =>
          claims.map((claim) => `${claim.session}/${claim.functionCallId}`);
        expect(ids(await store.listInDoubt("a"))).toEqual(["a/early", "a/late"]);
        expect(ids(await store.listInDoubt())).toEqual(["a/early", "b/1", "a/late"]);
      }),
    );

    check("every settled receipt status round-trips", () =>
      use(async ({ store }) => {
        for (const status of ["dispatched", "denied", "failed"] as const) {
          const key = { session: "s", functionCallId: status };
          await store.claim(key, record(status));
          await store.settle(key, { status, settledAt: 42 });
          expect((await store.get(key))?.receipt).toEqual({ status, settledAt: 42 });
        }
      }),
    );

    check("endSession forgets that session's claims only", () =>
      use(async ({ store }) => {
        const mine = { session: "ending", functionCallId: "1" };
        const settled = { session: "ending", functionCallId: "2" };
        const theirs = { session: "staying", functionCallId: "1" };
        for (const key of [mine, settled, theirs]) await store.claim(key, record("b"));
        await store.settle(settled, { status: "failed", settledAt: 7 });
        await store.endSession("ending");
        expect(await store.get(mine)).toBeUndefined();
        expect(await store.get(settled)).toBeUndefined();
        expect(await store.listInDoubt("ending")).toEqual([]);
        expect(await store.get(theirs)).toMatchObject(theirs);
        expect(await store.listInDoubt()).toEqual([{ ...theirs, ...record("b") }]);
        await store.endSession("never-existed");
      }),
    );

    check("64 concurrent claims of one key in one process: exactly one wins", () =>
      use(async ({ store }) => {
        const key = { session: "s", functionCallId: "hot" };
        const results = await Promise.all(
          Array.from({ length: 64 }, (_, i) => store.claim(key, record(`body-${i}`, `w${i}`))),
        );
        const winners = results.flatMap((r, i) => (r.status === "claimed" ? [i] : []));
        expect(winners).toHaveLength(1);
        const winner = winners[0] as number;
        for (const r of results) {
          if (r.status === "already_claimed") expect(r.existing.worker).toBe(`w${winner}`);
        }
        expect((await store.get(key))?.bodyHash).toBe(record(`body-${winner}`).bodyHash);
      }),
    );

    check("64 concurrent claims of 64 keys: every one is claimed", () =>
      use(async ({ store }) => {
        const keys = Array.from({ length: 64 }, (_, i) => ({
          session: "s",
          functionCallId: `${i}`,
        }));
        const results = await Promise.all(keys.map((key) => store.claim(key, record("b"))));
        expect(results.every((r) => r.status === "claimed")).toBe(true);
        expect(await store.listInDoubt("s")).toHaveLength(64);
      }),
    );

    check("hostile sessions and IDs are stored apart and read back exactly", () =>
      use(async ({ store }) => {
        const keys = HOSTILE_KEYS.flatMap((session) => [
          { session, functionCallId: "plain" },
          { session: "plain", functionCallId: session },
        ]);
        for (const key of keys) {
          expect(await store.claim(key, record(key.session + key.functionCallId))).toEqual({
            status: "claimed",
          });
        }
        for (const key of keys) {
          expect(await store.get(key)).toEqual({
            ...key,
            ...record(key.session + key.functionCallId),
          });
        }
        for (const session of HOSTILE_KEYS) {
          expect(await store.listInDoubt(session)).toEqual([
            { session, functionCallId: "plain", ...record(`${session}plain`) },
          ]);
        }
        expect(await store.get({ session: "a", functionCallId: "plain" })).toBeUndefined();
        for (const [session, functionCallId] of COLLIDING_PAIRS) {
          expect(await store.claim({ session, functionCallId }, record("c"))).toEqual({
            status: "claimed",
          });
        }
        await store.endSession("a\u0000b");
        expect(await store.get({ session: "a\u0000b", functionCallId: "plain" })).toBeUndefined();
        expect(await store.get({ session: "plain", functionCallId: "a\u0000b" })).toBeDefined();
      }),
    );

    check("an oversize (1 MiB) session or ID is stored exactly or refused with invalid_input", () =>
      use(async ({ store }) => {
        const big = oversize("é");
        for (const key of [
          { session: big, functionCallId: "x" },
          { session: "s", functionCallId: big },
        ]) {
          const outcome = await resultOrCode(
            () => store.claim(key, record("big")),
            ["invalid_input"],
          );
          if (!outcome.ok) continue;
          expect(outcome.value).toEqual({ status: "claimed" });
          expect(await store.get(key)).toEqual({ ...key, ...record("big") });
          const truncated = { ...key, functionCallId: key.functionCallId.slice(0, 100) };
          if (truncated.functionCallId !== key.functionCallId) {
            expect(await store.get(truncated)).toBeUndefined();
          }
        }
        expect(await store.claim({ session: "s", functionCallId: "after" }, record("a"))).toEqual({
          status: "claimed",
        });
      }),
    );

    describeClaimProcessAndOutageCases(factory);
  });
}
