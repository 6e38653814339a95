import { mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { ClaimStore, StoredClaim } from "@tessera/core";
import { InMemoryClaimStore } from "@tessera/core";
import { propertyParameters } from "@tessera/testkit";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { DirectoryClaimStore } from "./directory-store.js";

/** One step against a store; both stores must give the same answers to the same steps. */
type Step =
  | { kind: "claim"; session: string; id: string; body: string }
  | { kind: "settle"; session: string; id: string; status: "dispatched" | "denied" | "failed" }
  | { kind: "get"; session: string; id: string }
  | { kind: "listInDoubt"; session?: string }
  | { kind: "endSession"; session: string };

// Few distinct values, so sequences revisit the same keys (re-claims, double settles).
const part = fc.constantFrom("../x", "a\u0000b");
const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({
    kind: fc.constant("claim" as const),
    session: part,
    id: part,
    body: fc.constantFrom("1", "2"),
  }),
  fc.record({
    kind: fc.constant("settle" as const),
    session: part,
    id: part,
    status: fc.constantFrom("dispatched" as const, "denied" as const, "failed" as const),
  }),
  fc.record({ kind: fc.constant("get" as const), session: part, id: part }),
  fc.record({
    kind: fc.constant("listInDoubt" as const),
    session: fc.option(part, { nil: undefined }),
  }),
  fc.record({ kind: fc.constant("endSession" as const), session: part }),
);

const sorted = (claims: StoredClaim[]) => claims.map((c) => JSON.stringify(c)).sort();

async function apply(store: ClaimStore, s: Step, at: number): Promise<unknown> {
  switch (s.kind) {
    case "claim":
      return store.claim(
        { session: s.session, functionCallId: s.id },
        { bodyHash: s.body, claimedAt: at },
      );
    case "settle":
      // Settling an unclaimed key is refused: compare the refusal's code, not a thrown error.
      return store
        .settle({ session: s.session, functionCallId: s.id }, { status: s.status, settledAt: at })
        .catch((error: { code?: string }) => ({ refused: error.code }));
    case "get":
      return store.get({ session: s.session, functionCallId: s.id });
    case "listInDoubt":
      return sorted(await store.listInDoubt(s.session));
    case "endSession":
      return store.endSession(s.session);
  }
}

describe("DirectoryClaimStore behaves like the in-memory model", () => {
  it("for random sequences of claims, settles, reads and session ends (hostile keys included)", async () => {
    const root = mkdtempSync(path.join(tmpdir(), "tessera-dir-model-"));
    let run = 0;
    try {
      await fc.assert(
        fc.asyncProperty(fc.array(step, { minLength: 10, maxLength: 40 }), async (steps) => {
          const dir = path.join(root, `run-${run++}`);
          mkdirSync(dir, { mode: 0o700 });
          const model = new InMemoryClaimStore();
          const real = await DirectoryClaimStore.open(dir);
          try {
            for (const [index, s] of steps.entries()) {
              expect(await apply(real, s, index)).toEqual(await apply(model, s, index));
            }
            for (const name of readdirSync(dir)) expect(name).toMatch(/^[0-9a-f]{64}$/);
          } finally {
            await real.close();
            rmSync(dir, { recursive: true, force: true });
          }
        }),
        propertyParameters({ numRuns: 60 }),
      );
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
