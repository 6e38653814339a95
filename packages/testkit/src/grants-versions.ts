import { createKernel, type GrantInput, GrantSchema, type GrantStore } from "@tessera/core";
import { expect } from "vitest";
import { expectCode, resultOrCode } from "./errors.js";
import { type OpenedStore, type StoreFactory, suiteCases } from "./factory.js";
import { grantInput, parsed } from "./grants-fixtures.js";
import { raceInProcesses } from "./processes.js";

const UNAVAILABLE = ["grant_store_unavailable"];

/**
 * Reads of one holder as [version before, grant set, version after]. A read whose two versions
 * agree saw the set at that version (versions never repeat), so every such read of one
 * version must show the same set. A store that bumps the version in a separate step from the
 * change (before or after it) lets some reader confirm one version with two different sets.
 * Returns the conflicting version, if any, and how many distinct versions were confirmed.
 */
export function checkVersionedReads(reads: readonly (readonly [string, string, string])[]): {
  readonly conflict: string | undefined;
  readonly confirmed: number;
} {
  const seen = new Map<string, string>();
  for (const [before, set, after] of reads) {
    if (before !== after) continue;
    const known = seen.get(before);
    if (known === undefined) seen.set(before, set);
    else if (known !== set) return { conflict: before, confirmed: seen.size };
  }
  return { conflict: undefined, confirmed: seen.size };
}

function setOf(list: readonly unknown[]): string {
  return (list as { id: string; revokedAt?: string }[])
    .map((g) => `${g.id}:${g.revokedAt === undefined ? 0 : 1}`)
    .sort()
    .join(",");
}

type Versioned = GrantStore & Required<Pick<GrantStore, "grantsVersion">>;
type Batching = GrantStore & Required<Pick<GrantStore, "addMany">>;

/**
 * The grant cases about versions and batches (`grantsVersion`, `addMany`: optional in the
 * port, so a store without them passes these cases vacuously), readers racing writers in one
 * process and across OS processes, and the outage case. Declared inside
 * `describeGrantStoreConformance`'s block, after its add, list and revoke cases.
 */
export function describeGrantVersionCases<H extends OpenedStore<GrantStore>>(
  factory: StoreFactory<GrantStore, H>,
): void {
  const { use, check, crossProcess, skipNote, outageCase, outageNote } = suiteCases(factory);

  // grantsVersion and addMany are optional in the port; a store that has them is held to
  // them here (every store Tessera ships has both).
  const versioned = (store: GrantStore): store is Versioned =>
    typeof store.grantsVersion === "function";
  const batching = (store: GrantStore): store is Batching => typeof store.addMany === "function";

  check("grantsVersion changes with every add and revoke, per holder, never on reads", () =>
    use(async ({ store }) => {
      if (!versioned(store)) return;
      const v = (ns: string, subject: string) => store.grantsVersion(ns, subject);
      const start = await v("ns", "agent");
      expect(typeof start).toBe("string");
      const other = await v("ns", "other");
      const elsewhere = await v("ns2", "agent");
      const history = [start];
      await store.add(grantInput({ id: "a" }));
      history.push(await v("ns", "agent"));
      await store.listGrants("ns", "agent");
      await store.listNamespace("ns");
      expect(await v("ns", "agent")).toBe(history.at(-1));
      await store.add(grantInput({ id: "b" }));
      history.push(await v("ns", "agent"));
      expect(await store.revoke("ns", "a")).toBe(true);
      history.push(await v("ns", "agent"));
      // Every state had its own version, none repeated.
      expect(new Set(history).size).toBe(history.length);
      // Other holders, and the same holder in another namespace, did not move.
      expect(await v("ns", "other")).toBe(other);
      expect(await v("ns2", "agent")).toBe(elsewhere);
      await store.add(grantInput({ id: "c", subject: "other" }));
      expect(await v("ns", "other")).not.toBe(other);
      expect(await v("ns", "agent")).toBe(history.at(-1));
      // A holder whose ID runs into the namespace's is still another holder.
      const joined = await v("nsa", "gent");
      await store.add(grantInput({ id: "d", namespaceId: "n", subject: "sagent" }));
      expect(await v("nsa", "gent")).toBe(joined);
      expect(await v("ns", "agent")).toBe(history.at(-1));
    }),
  );

  check("addMany bumps every holder it adds to; a refused batch adds nothing", () =>
    use(async ({ store }) => {
      if (!versioned(store) || !batching(store)) return;
      const before = await Promise.all(["agent", "other"].map((s) => store.grantsVersion("ns", s)));
      const added = await store.addMany([
        grantInput({ id: "m1" }),
        grantInput({ id: "m2", subject: "other" }),
        grantInput({ id: "m3", namespaceId: "ns2" }),
      ]);
      expect(added.map((g) => g.id)).toEqual(["m1", "m2", "m3"]);
      expect(added[0]).toEqual(GrantSchema.parse(grantInput({ id: "m1" })));
      const after = await Promise.all(["agent", "other"].map((s) => store.grantsVersion("ns", s)));
      expect(after[0]).not.toBe(before[0]);
      expect(after[1]).not.toBe(before[1]);
      const refusals: GrantInput[][] = [
        [grantInput({ id: "fresh-1" }), grantInput({ id: "m1" })],
        [grantInput({ id: "fresh-2" }), grantInput({ id: "fresh-2", subject: "other" })],
        [grantInput({ id: "fresh-3" }), { ...grantInput({ id: "bad" }), capabilities: [] }],
      ];
      for (const batch of refusals) {
        await expectCode(() => store.addMany(batch), ["invalid_grant"]);
      }
      expect(setOf(await store.listNamespace("ns"))).toBe("m1:0,m2:0");
      expect(await store.addMany([])).toEqual([]);
    }),
  );

  check(
    "addMany keeps 2,000 grants of 100 holders, in order, each holder bumped once or more",
    () =>
      use(async ({ store }) => {
        if (!batching(store)) return;
        const holders = Array.from({ length: 100 }, (_, i) => `h-${i}`);
        const before = versioned(store)
          ? await Promise.all(holders.map((h) => store.grantsVersion("ns", h)))
          : [];
        const batch = Array.from({ length: 2000 }, (_, i) =>
          grantInput({ id: `b-${i}`, subject: holders[i % 100] as string }),
        );
        await store.addMany(batch);
        const listed = await store.listGrants("ns", "h-7");
        expect(listed.map((g) => (g as { id: string }).id)).toEqual(
          Array.from({ length: 20 }, (_, k) => `b-${7 + k * 100}`),
        );
        expect(await store.listNamespace("ns")).toHaveLength(2000);
        if (versioned(store)) {
          const after = await Promise.all(holders.map((h) => store.grantsVersion("ns", h)));
          for (const [i, version] of after.entries()) expect(version).not.toBe(before[i]);
        }
      }),
  );

  check("400 concurrent turns on a cold kernel read an 800-grant set once", () =>
    use(async ({ store }) => {
      if (!versioned(store) || !batching(store)) return;
      await store.addMany(
        Array.from({ length: 800 }, (_, i) =>
          grantInput({
            id: `cold-${i}`,
            constraints: {},
            capabilities: [
              {
                resource: { namespace: "files", path: [`r-${i}`], owner: "alice" },
                actions: ["files.read"],
                scope: "exact",
              },
            ],
          }),
        ),
      );
      // Counted at the store's own methods: every full read the kernel makes goes through here.
      let reads = 0;
      const source = {
        listGrants: (ns: string, subject: string) => {
          reads++;
          return store.listGrants(ns, subject);
        },
        grantsVersion: (ns: string, subject: string) => store.grantsVersion(ns, subject),
      };
      const kernel = createKernel({ grants: source });
      const turns = await Promise.all(
        Array.from({ length: 400 }, (_, i) =>
          kernel.openTurnAuthority({
            namespaceId: "ns",
            actor: "agent",
            authority: "host",
            owner: "alice",
            traceId: `cold-${i}`,
          }),
        ),
      );
      expect(reads).toBe(1);
      // Every turn holds the whole set: the shared read is the real one.
      const tools = await Promise.all(turns.map((turn) => turn.listTools()));
      expect(new Set(tools.map((t) => t.join()))).toEqual(new Set(["files.read"]));
      await Promise.all(turns.map((turn) => turn.close()));
      // A revocation is a new version: the next turn reads again.
      await store.revoke("ns", "cold-0");
      await kernel.openTurnAuthority({
        namespaceId: "ns",
        actor: "agent",
        authority: "host",
        traceId: "after",
      });
      expect(reads).toBe(2);
    }),
  );

  check("64 concurrent writers and readers: one version never shows two grant sets", () =>
    use(async ({ store }) => {
      if (!versioned(store)) return;
      const reads: [string, string, string][] = [];
      let writing = true;
      const reader = async () => {
        while (writing) {
          const before = await store.grantsVersion("ns", "agent");
          const set = setOf(await store.listGrants("ns", "agent"));
          reads.push([before, set, await store.grantsVersion("ns", "agent")]);
          // A macrotask turn per read: an in-memory store answers in microtasks, and a
          // reader that never yields would starve writers waiting on timers or I/O.
          await new Promise<void>((resolve) => setImmediate(resolve));
        }
      };
      const writer = async (w: number) => {
        for (let i = 0; i < 4; i++) {
          await store.add(grantInput({ id: `w${w}-${i}` }));
          if (i % 2 === 1) await store.revoke("ns", `w${w}-${i - 1}`);
        }
      };
      const readers = Array.from({ length: 8 }, reader);
      await Promise.all(Array.from({ length: 56 }, (_, w) => writer(w)));
      writing = false;
      await Promise.all(readers);
      const { conflict } = checkVersionedReads(reads);
      expect(conflict).toBeUndefined();
    }),
  );

  crossProcess(
    `versions move with the change across processes: 4 writers, 4 readers${skipNote}`,
    () =>
      use(async (opened) => {
        const spec = factory.processSpec?.(opened);
        if (!spec) throw new Error("unreachable: guarded by processSpec");
        const { store } = opened;
        if (!versioned(store)) return;
        const start = await store.grantsVersion("ns", "agent");
        const perWriter = 30;
        const revokeEvery = 3;
        const results = await raceInProcesses(spec, 8, (worker) =>
          worker < 4
            ? {
                kind: "churnGrants",
                grants: Array.from({ length: perWriter }, (_, i) =>
                  grantInput({ id: `p${worker}-${i}` }),
                ),
                revokeEvery,
              }
            : {
                kind: "watchGrants",
                namespaceId: "ns",
                subject: "agent",
                finalSize: 4 * perWriter,
                finalRevoked: 4 * (perWriter / revokeEvery),
                deadlineMs: 60_000,
              },
        );
        const reads: [string, string, string][] = [];
        for (const result of results) {
          if (result.kind !== "watchGrants") continue;
          expect(result.done).toBe(true);
          reads.push(...result.reads);
        }
        const { conflict, confirmed } = checkVersionedReads(reads);
        expect(conflict).toBeUndefined();
        // The readers overlapped the writers: they confirmed many states, not just the last.
        expect(confirmed).toBeGreaterThan(1);
        const end = await store.grantsVersion("ns", "agent");
        expect(end).not.toBe(start);
        const last: [string, string, string] = [
          end,
          setOf(await store.listGrants("ns", "agent")),
          end,
        ];
        expect(checkVersionedReads([...reads, last]).conflict).toBeUndefined();
      }),
  );

  outageCase(`outage: fails closed with grant_store_unavailable, recovers${outageNote}`, () =>
    use(async (opened) => {
      const outage = factory.outage?.(opened);
      if (!outage) throw new Error("unreachable: guarded by outage");
      const { store } = opened;
      await store.add(grantInput({ id: "before" }));
      await outage.interrupt();
      try {
        if (outage.kind !== "blip") {
          await expectCode(() => store.listGrants("ns", "agent"), UNAVAILABLE);
          await expectCode(() => store.listNamespace("ns"), UNAVAILABLE);
          await expectCode(() => store.add(grantInput({ id: "during" })), UNAVAILABLE);
          await expectCode(() => store.revoke("ns", "before"), UNAVAILABLE);
          if (versioned(store)) {
            await expectCode(() => store.grantsVersion("ns", "agent"), UNAVAILABLE);
          }
          if (batching(store)) {
            await expectCode(() => store.addMany([grantInput({ id: "during" })]), UNAVAILABLE);
          }
        } else {
          await resultOrCode(() => store.listGrants("ns", "agent"), UNAVAILABLE);
        }
      } finally {
        await outage.restore();
      }
      await store.add(grantInput({ id: "after" }));
      const ids = parsed(await store.listGrants("ns", "agent")).map((g) => g.id);
      expect(ids).toContain("before");
      expect(ids).toContain("after");
    }),
  );
}
