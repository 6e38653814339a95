/**
 * Model-based property tests: random sequences of operations on the SQLite usage and claim
 * stores give exactly what a plain in-memory model of the contract gives. Runs on
 * `sqlite::memory:` so each sequence gets a fresh database cheaply; the SQL is the same.
 */
import { openStores } from "@tessera/sqlite";
import { propertyParameters } from "@tessera/testkit";
import fc from "fast-check";
import { describe, expect, it } from "vitest";

const ids = fc.constantFrom("a", "b", "a:b", "b:", "\u0000", "é", "'; --");

describe("usage store matches the model", () => {
  it("tryConsume and getUsage agree with a counter per (namespace, grant)", async () => {
    const operation = fc.record({
      namespaceId: ids,
      grantId: ids,
      maxUses: fc.integer({ min: 1, max: 4 }),
      read: fc.boolean(),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(operation, { maxLength: 40 }), async (operations) => {
        const stores = await openStores("sqlite::memory:");
        const model = new Map<string, number>();
        try {
          for (const op of operations) {
            const key = JSON.stringify([op.namespaceId, op.grantId]);
            const used = model.get(key) ?? 0;
            if (op.read) {
              expect(await stores.usage.getUsage(op.namespaceId, op.grantId)).toBe(used);
              continue;
            }
            const consumed = used < op.maxUses;
            if (consumed) model.set(key, used + 1);
            expect(await stores.usage.tryConsume(op.namespaceId, op.grantId, op.maxUses)).toEqual({
              consumed,
              used: consumed ? used + 1 : used,
            });
          }
        } finally {
          await stores.close();
        }
      }),
      propertyParameters({ numRuns: 60 }),
    );
  });
});

describe("claim store matches the model", () => {
  it("claim, settle, get, listInDoubt and endSession agree with a map of claims", async () => {
    const operation = fc.oneof(
      fc.record({ kind: fc.constant("claim" as const), session: ids, id: ids, body: fc.string() }),
      fc.record({
        kind: fc.constant("settle" as const),
        session: ids,
        id: ids,
        status: fc.constantFrom("dispatched" as const, "denied" as const, "failed" as const),
      }),
      fc.record({ kind: fc.constant("end" as const), session: ids }),
      fc.record({
        kind: fc.constant("inDoubt" as const),
        session: fc.option(ids, { nil: undefined }),
      }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(operation, { maxLength: 40 }), async (operations) => {
        const stores = await openStores("sqlite::memory:");
        type Claim = {
          session: string;
          functionCallId: string;
          bodyHash: string;
          claimedAt: number;
        };
        const model = new Map<
          string,
          Claim & { receipt?: { status: string; settledAt: number } }
        >();
        let clock = 0;
        try {
          for (const op of operations) {
            clock++;
            if (op.kind === "claim") {
              const key = JSON.stringify([op.session, op.id]);
              const record = { bodyHash: op.body, claimedAt: clock };
              const existing = model.get(key);
              const result = await stores.claims.claim(
                { session: op.session, functionCallId: op.id },
                record,
              );
              if (existing) {
                expect(result).toEqual({ status: "already_claimed", existing });
              } else {
                expect(result).toEqual({ status: "claimed" });
                model.set(key, { session: op.session, functionCallId: op.id, ...record });
              }
            } else if (op.kind === "settle") {
              const key = JSON.stringify([op.session, op.id]);
              const existing = model.get(key);
              const settle = stores.claims.settle(
                { session: op.session, functionCallId: op.id },
                { status: op.status, settledAt: clock },
              );
              if (existing) {
                await settle;
                model.set(key, { ...existing, receipt: { status: op.status, settledAt: clock } });
              } else {
                await expect(settle).rejects.toMatchObject({ code: "invalid_input" });
              }
            } else if (op.kind === "end") {
              await stores.claims.endSession(op.session);
              for (const [key, claim] of model) if (claim.session === op.session) model.delete(key);
            } else {
              const expected = [...model.values()]
                .filter((c) => !c.receipt && (op.session === undefined || c.session === op.session))
                .sort((x, y) => x.claimedAt - y.claimedAt);
              expect(await stores.claims.listInDoubt(op.session)).toEqual(expected);
            }
          }
        } finally {
          await stores.close();
        }
      }),
      propertyParameters({ numRuns: 60 }),
    );
  });
});
