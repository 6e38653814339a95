/**
 * Grant-version reads in flight together share one statement, each caller getting its own
 * holder's version, and a read never borrows the answer of a statement that was already on
 * the wire when it was asked (a revoke committed before the read must be seen by it).
 */
import type { GrantInput } from "@tessera/core";
import { serviceUrl } from "@tessera/testkit";
import { describe, expect, it, vi } from "vitest";
import { Database } from "../src/database.js";
import type { PostgresGrantStore } from "../src/grant-store.js";
import { codeOf, storesPerTest, type TestStores } from "./support/pg-test-stores.js";

const url = serviceUrl("TESSERA_PG_URL");
const suite = url ? describe : describe.skip;

const openStores = storesPerTest(url);

async function opened(): Promise<TestStores & { grants: PostgresGrantStore }> {
  const stores = await openStores();
  return { ...stores, grants: stores.stores.grants as PostgresGrantStore };
}

const grant = (id: string, subject: string, namespaceId = "ns"): GrantInput => ({
  id,
  namespaceId,
  issuer: "host",
  subject,
  capabilities: [
    {
      resource: { namespace: "messages", path: ["bob"], owner: "alice" },
      actions: ["messages.send"],
      scope: "exact",
    },
  ],
  issuedAt: "2026-01-01T00:00:00.000Z",
});

const isVersionRead = (text: unknown) =>
  typeof text === "string" && text.includes("grant_versions");

interface VersionReadWatch {
  /** Version statements sent so far. */
  count(): number;
  /** Version statements the server has answered (the caller may not have its answer yet). */
  answered(): number;
  /** Statements sent from now on keep their answers until `gate` settles (still in flight). */
  hold(gate?: Promise<void>): void;
}

/** Wraps the store's one statement seam, `Database.query`, to count and delay version reads. */
function watchVersionReads(): VersionReadWatch {
  const original = Database.prototype.query;
  let sent = 0;
  let answered = 0;
  let gate: Promise<void> | undefined;
  vi.spyOn(Database.prototype, "query").mockImplementation(function (this: Database, ...args) {
    const answer = original.apply(this, args);
    if (!isVersionRead(args[1])) return answer;
    sent++;
    const held = gate;
    return answer.then(async (result) => {
      answered++;
      if (held !== undefined) await held;
      return result;
    });
  } as typeof original);
  return { count: () => sent, answered: () => answered, hold: (next) => (gate = next) };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

/** Waits until `done()` or `ms` pass; the assertions after it judge what happened. */
async function until(done: () => boolean, ms = 2_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!done() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
}

suite("postgres grant-version reads", () => {
  it("64 concurrent reads of mixed holders: a few statements, each the holder's own version", async () => {
    const { grants } = await opened();
    const holders = ["a", "b", "c", "d", "never"];
    await grants.addMany([grant("a1", "a"), grant("b1", "b"), grant("b2", "b")]);
    await grants.add(grant("c1", "c"));
    await grants.add(grant("c2", "c"));
    await grants.revoke("ns", "c1");
    await grants.add(grant("d1", "d", "other"));
    const alone = new Map<string, string>();
    for (const holder of holders) alone.set(holder, await grants.grantsVersion("ns", holder));
    const otherD = await grants.grantsVersion("other", "d");
    // Distinct but for the two holders without grants here, so a mixed-up answer shows.
    expect(new Set([...alone.values(), otherD]).size).toBe(holders.length);
    expect(alone.get("never")).toBe("0");
    expect(alone.get("d")).toBe("0");

    const reads = watchVersionReads();
    const asked = Array.from({ length: 64 }, (_, i) =>
      i % 7 === 6 ? (["other", "d"] as const) : (["ns", holders[i % holders.length]] as const),
    );
    const answers = await Promise.all(
      asked.map(([ns, holder]) => grants.grantsVersion(ns, holder as string)),
    );
    answers.forEach((answer, i) => {
      const [ns, holder] = asked[i] as readonly [string, string];
      expect(answer).toBe(ns === "other" ? otherD : alone.get(holder));
    });
    // All 64 were asked in one tick: one statement (the old store sent 64).
    expect(reads.count()).toBe(1);
  });

  it("reads asked while one is on the wire wait for it, then leave as one statement", async () => {
    const { grants } = await opened();
    await grants.add(grant("a1", "a"));
    const reads = watchVersionReads();
    let release = () => {};
    reads.hold(new Promise<void>((resolve) => (release = resolve)));
    const first = grants.grantsVersion("ns", "a");
    await tick();
    const later = Array.from({ length: 33 }, (_, i) =>
      grants.grantsVersion("ns", i % 2 === 0 ? "a" : `h${i}`),
    );
    await tick();
    expect(reads.count()).toBe(1);
    reads.hold(undefined);
    release();
    const version = await first;
    const answers = await Promise.all(later);
    expect(answers).toEqual(later.map((_, i) => (i % 2 === 0 ? version : "0")));
    // The old store sent 34.
    expect(reads.count()).toBe(2);
  });

  it("a revoke committed before a read is seen by it, even with older reads still in flight", async () => {
    const { grants } = await opened();
    await grants.add(grant("g1", "agent"));
    await grants.add(grant("g2", "agent"));
    const before = await grants.grantsVersion("ns", "agent");
    const reads = watchVersionReads();
    let release = () => {};
    reads.hold(new Promise<void>((resolve) => (release = resolve)));
    // Reads whose statement ran before the revoke, their answers held back: in flight.
    const stale = [grants.grantsVersion("ns", "agent"), grants.grantsVersion("ns", "agent")];
    await until(() => reads.answered() >= 1);
    expect(await grants.revoke("ns", "g1")).toBe(true);
    const fresh = grants.grantsVersion("ns", "agent");
    await tick();
    reads.hold(undefined);
    release();
    for (const read of stale) expect(await read).toBe(before);
    const after = await fresh;
    expect(after).not.toBe(before);
    expect(after).toBe(await grants.grantsVersion("ns", "agent"));
  });

  it("a bad ID rejects only its own caller; a failed statement fails its whole batch closed", async () => {
    const { grants, proxy } = await opened();
    await grants.add(grant("a1", "a"));
    const expected = await grants.grantsVersion("ns", "a");
    const mixed = await Promise.allSettled([
      grants.grantsVersion("ns", "a"),
      grants.grantsVersion(42 as unknown as string, "a"),
      grants.grantsVersion("ns", "b"),
    ]);
    expect(mixed[0]).toEqual({ status: "fulfilled", value: expected });
    expect(mixed[1]?.status).toBe("rejected");
    expect(codeOf((mixed[1] as PromiseRejectedResult).reason)).toBe("invalid_input");
    expect(mixed[2]).toEqual({ status: "fulfilled", value: "0" });

    proxy.interrupt();
    try {
      const failed = await Promise.allSettled(
        ["a", "b", "c"].map((holder) => grants.grantsVersion("ns", holder)),
      );
      for (const outcome of failed) {
        expect(outcome.status).toBe("rejected");
        expect(codeOf((outcome as PromiseRejectedResult).reason)).toBe("grant_store_unavailable");
      }
    } finally {
      proxy.restore();
    }
  });
});
