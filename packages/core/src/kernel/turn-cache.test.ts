import { describe, expect, it } from "vitest";
import { ASKER, cap, ctx, grant, HOST, NS, OWNER, T0 } from "../../test/fixtures.js";
import {
  type AccessContext,
  createKernel,
  deriveGrant,
  type GrantSource,
  InMemoryAuditSink,
  InMemoryGrantStore,
  InMemoryGrantUsageStore,
  isTesseraError,
  type KernelOptions,
} from "../index.js";
import { TurnCache, viewOf } from "./turn-cache.js";

/**
 * Opening a turn on an unchanged, versioned grant set reuses the set validated and indexed
 * for an earlier turn. Every case checks what the reuse must never do: keep a revoked grant
 * or a broken chain alive, mix up turn shapes, or leak past its bounds.
 */

const READ = { action: "files.read", resource: { namespace: "files", path: ["a"] } };

/** Counts listings per subject and version reads; `versions: false` hides grantsVersion. */
function counted(inner: InMemoryGrantStore, options: { versions?: boolean } = {}) {
  const source = {
    lists: new Map<string, number>(),
    versionReads: 0,
    get listed() {
      let total = 0;
      for (const n of source.lists.values()) total += n;
      return total;
    },
    listGrants: async (namespaceId: string, subject: string) => {
      source.lists.set(subject, (source.lists.get(subject) ?? 0) + 1);
      return inner.listGrants(namespaceId, subject);
    },
    ...(options.versions === false
      ? {}
      : {
          grantsVersion: async (namespaceId: string, subject: string) => {
            source.versionReads++;
            return inner.grantsVersion(namespaceId, subject);
          },
        }),
  };
  return source;
}

function setup(extra: Partial<KernelOptions> = {}, versions = true) {
  const store = new InMemoryGrantStore();
  const source = counted(store, { versions });
  const usage = new InMemoryGrantUsageStore();
  const audit = new InMemoryAuditSink();
  const kernel = createKernel({ grants: source, usage, audit, ...extra });
  return { store, source, usage, audit, kernel };
}

async function once(
  kernel: ReturnType<typeof createKernel>,
  request: typeof READ = READ,
  context: Partial<AccessContext> = {},
) {
  const turn = await kernel.openTurnAuthority(
    ctx({ now: new Date(T0 + 1000).toISOString(), ...context }),
  );
  try {
    return await turn.authorize(request);
  } finally {
    await turn.close();
  }
}

describe("turn cache: reuse while the version is unchanged", () => {
  it("lists once, then opens on one version read per turn", async () => {
    const { store, source, kernel } = setup();
    for (let i = 0; i < 50; i++) await store.add(grant({ capabilities: [cap([`f${i}`])] }));
    await store.add(grant({ capabilities: [cap(["a"])] }));
    for (let i = 0; i < 5; i++) expect((await once(kernel)).status).toBe("allowed");
    expect(source.listed).toBe(1);
    expect(source.versionReads).toBe(5);
  });

  it("a revocation lands on the next turn with the cache warm", async () => {
    const { store, source, kernel, audit } = setup();
    const held = await store.add(grant({ capabilities: [cap(["a"])] }));
    expect((await once(kernel)).status).toBe("allowed");
    expect((await once(kernel)).status).toBe("allowed");
    expect(await store.revoke(NS, held.id)).toBe(true);
    expect(await once(kernel)).toEqual({ status: "denied", code: "tool_unavailable" });
    expect(audit.events.at(-1)?.reason).toBe("revoked");
    expect(source.listed).toBe(2);
  });

  it("an added grant counts on the next turn with the cache warm", async () => {
    const { store, kernel } = setup();
    await store.add(grant({ capabilities: [cap(["b"])] }));
    expect((await once(kernel)).status).toBe("denied");
    await store.add(grant({ capabilities: [cap(["a"])] }));
    expect((await once(kernel)).status).toBe("allowed");
  });

  it("turnCache: false reads the source in full every turn", async () => {
    const { store, source, kernel } = setup({ turnCache: false });
    await store.add(grant({ capabilities: [cap(["a"])] }));
    for (let i = 0; i < 3; i++) expect((await once(kernel)).status).toBe("allowed");
    expect(source.listed).toBe(3);
    expect(source.versionReads).toBe(0);
  });

  it("a source without grantsVersion is read in full every turn", async () => {
    const { store, source, kernel } = setup({}, false);
    await store.add(grant({ capabilities: [cap(["a"])] }));
    for (let i = 0; i < 3; i++) expect((await once(kernel)).status).toBe("allowed");
    expect(source.listed).toBe(3);
  });

  it("a version read that fails or answers a non-string only disables the cache", async () => {
    for (const answer of [
      async () => {
        throw new Error("down");
      },
      async () => 7 as unknown as string,
    ]) {
      const store = new InMemoryGrantStore();
      await store.add(grant({ capabilities: [cap(["a"])] }));
      let lists = 0;
      const source: GrantSource = {
        listGrants: (n, s) => {
          lists++;
          return store.listGrants(n, s);
        },
        grantsVersion: answer,
      };
      const kernel = createKernel({ grants: source });
      expect((await once(kernel)).status).toBe("allowed");
      expect((await once(kernel)).status).toBe("allowed");
      expect(lists).toBe(2);
    }
  });

  it("refuses a malformed turnCache option with invalid_config", () => {
    for (const turnCache of [{ maxSubjects: -1 }, { maxWeight: 1.5 }, "on", null]) {
      const thrown = (() => {
        try {
          createKernel({ grants: new InMemoryGrantStore(), turnCache } as unknown as KernelOptions);
        } catch (error) {
          return error;
        }
      })();
      expect(isTesseraError(thrown, "invalid_config")).toBe(true);
    }
  });
});

describe("turn cache: turn shapes", () => {
  it("indexes the same set apart per authority, owner and purpose", async () => {
    const { store, source, kernel } = setup();
    await store.add(
      grant({ capabilities: [cap(["a"], { owner: OWNER })], constraints: { purposes: ["p"] } }),
    );
    const turns: [Partial<AccessContext>, string][] = [
      [{ purpose: "p" }, "allowed"],
      [{ purpose: "q" }, "denied"],
      [{ purpose: "p", authority: "someone-else" }, "denied"],
      [{ purpose: "p", owner: "mallory" }, "denied"],
      [{}, "denied"],
      [{ purpose: "p" }, "allowed"],
    ];
    for (const [context, status] of turns) {
      expect((await once(kernel, READ, context)).status, JSON.stringify(context)).toBe(status);
    }
    // Each shape reindexes the cached set; none of them lists it again.
    expect(source.listed).toBe(1);
  });

  it("a spent ticket stays spent for later turns; a new ticket is fresh", async () => {
    const { store, kernel, audit, usage } = setup();
    await store.add(grant({ capabilities: [cap(["a"])], constraints: { maxUses: 1 } }));
    expect((await once(kernel)).status).toBe("allowed");
    expect(await once(kernel)).toEqual({ status: "denied", code: "tool_unavailable" });
    expect(audit.events.at(-1)?.reason).toBe("grant_exhausted");
    const fresh = await store.add(
      grant({ capabilities: [cap(["a"])], constraints: { maxUses: 1 } }),
    );
    const allowed = await once(kernel);
    expect(allowed).toMatchObject({ status: "allowed", grantId: fresh.id });
    expect(await usage.getUsage(NS, fresh.id)).toBe(1);
  });
});

describe("turn cache: chains", () => {
  const narrow = (id: string, subject: string) => ({
    id,
    subject,
    capabilities: [cap(["a"], { scope: "descendants", owner: OWNER })],
  });

  async function chain(store: InMemoryGrantStore) {
    const top = await store.add(
      grant({ id: "top", subject: "agent", capabilities: [cap(["a"], { scope: "descendants" })] }),
    );
    const mid = await store.add(deriveGrant(top, narrow("mid", "mid"), { issuer: "agent" }));
    await store.add(deriveGrant(mid, narrow("leaf", ASKER), { issuer: "mid" }));
  }

  for (const [broken, holder] of [
    ["top", "agent"],
    ["mid", "mid"],
  ] as const) {
    it(`revoking the ${broken} grant kills the leaf on the next turn with the cache warm`, async () => {
      const { store, source, kernel, audit } = setup();
      await chain(store);
      expect((await once(kernel)).status).toBe("allowed");
      expect((await once(kernel)).status).toBe("allowed");
      // The warm turn read no grants at all: the holders' versions vouched for the chain.
      expect(source.lists.get(holder)).toBe(1);
      expect(await store.revoke(NS, broken)).toBe(true);
      expect((await once(kernel)).status).toBe("denied");
      expect(audit.events.at(-1)).toMatchObject({ reason: "revoked", grantId: "leaf" });
      expect(source.lists.get(ASKER)).toBe(1);
    });
  }

  // The in-memory store answers versions synchronously (kernel/sync-ports.ts): the kernel
  // reads them without awaiting, and a warm view must still die with its chain.
  for (const [broken, holder] of [
    ["top", "agent"],
    ["mid", "mid"],
  ] as const) {
    it(`over the in-memory store itself, revoking the ${broken} grant kills the leaf on the next turn`, async () => {
      const store = new InMemoryGrantStore();
      const audit = new InMemoryAuditSink();
      const kernel = createKernel({ grants: store, usage: new InMemoryGrantUsageStore(), audit });
      await chain(store);
      expect((await once(kernel)).status).toBe("allowed");
      expect((await once(kernel)).status).toBe("allowed");
      expect(await store.revoke(NS, broken)).toBe(true);
      expect((await once(kernel)).status).toBe("denied");
      expect(audit.events.at(-1)).toMatchObject({ reason: "revoked", grantId: "leaf" });
      expect(holder).not.toBe(ASKER);
    });
  }

  it("an instance whose grantsVersion is replaced is asked through the port, holders included", async () => {
    const store = new InMemoryGrantStore();
    const asked: string[] = [];
    const original = store.grantsVersion.bind(store);
    store.grantsVersion = async (namespaceId: string, subject: string) => {
      asked.push(subject);
      return original(namespaceId, subject);
    };
    const kernel = createKernel({ grants: store, usage: new InMemoryGrantUsageStore() });
    await chain(store);
    expect((await once(kernel)).status).toBe("allowed");
    asked.length = 0;
    expect((await once(kernel)).status).toBe("allowed");
    expect(asked.sort()).toEqual([ASKER, "agent", "mid"].sort());
  });

  it("an object borrowing the store's grantsVersion (its twin throws) is read in full every turn", async () => {
    const store = new InMemoryGrantStore();
    await chain(store);
    let lists = 0;
    const borrower = {
      listGrants: (namespaceId: string, subject: string) => {
        lists++;
        return store.listGrants(namespaceId, subject);
      },
      grantsVersion: InMemoryGrantStore.prototype.grantsVersion,
    };
    const kernel = createKernel({ grants: borrower, usage: new InMemoryGrantUsageStore() });
    expect((await once(kernel)).status).toBe("allowed");
    const afterFirst = lists;
    expect((await once(kernel)).status).toBe("allowed");
    // No version known, so nothing cached: the second turn listed the chain again.
    expect(lists).toBe(afterFirst * 2);
    expect(await store.revoke(NS, "mid")).toBe(true);
    expect((await once(kernel)).status).toBe("denied");
  });

  it("a chain whose root another authority issued stays broken in a warm view", async () => {
    const { store, kernel } = setup();
    await chain(store);
    expect((await once(kernel)).status).toBe("allowed");
    expect((await once(kernel, READ, { authority: "other" })).status).toBe("denied");
    expect((await once(kernel)).status).toBe("allowed");
    expect(HOST).not.toBe("other");
  });
});

describe("turn cache: bounds", () => {
  it("keeps at most maxSubjects grant sets, least recently used out first", async () => {
    const { store, source, kernel } = setup({ turnCache: { maxSubjects: 1 } });
    for (const subject of [ASKER, "second"]) {
      await store.add(grant({ subject, capabilities: [cap(["a"])] }));
    }
    for (let i = 0; i < 3; i++) {
      await once(kernel);
      await once(kernel, READ, { actor: "second" });
    }
    expect(source.lists.get(ASKER)).toBe(3);
    expect(source.lists.get("second")).toBe(3);
  });

  it("never caches a set heavier than maxWeight", async () => {
    const { store, source, kernel } = setup({ turnCache: { maxWeight: 10 } });
    for (let i = 0; i < 5; i++) await store.add(grant({ capabilities: [cap([`f${i}`])] }));
    await once(kernel);
    await once(kernel);
    expect(source.listed).toBe(2);
  });

  it("weighs what it holds and gives the weight back on eviction", () => {
    const cache = new TurnCache({ maxSubjects: 2, maxWeight: 1_000 });
    const view = { chains: undefined, holders: new Map(), index: new Map() };
    const grants = [{ capabilities: [{}, {}] }] as never;
    cache.set("ns", "a", "1", grants, { authority: "h" }, view);
    expect(cache.weight).toBe(6);
    const entry = cache.get("ns", "a", "1");
    if (entry === undefined) throw new Error("expected a cached set");
    cache.setView(entry, { authority: "h", owner: "o" }, view);
    expect(cache.weight).toBe(9);
    cache.set("ns", "b", "1", grants, { authority: "h" }, view);
    cache.set("ns", "c", "1", grants, { authority: "h" }, view);
    expect(cache.size).toBe(2);
    expect(cache.get("ns", "a", "1")).toBeUndefined();
    expect(cache.weight).toBe(12);
    // A stale version drops the set.
    expect(cache.get("ns", "b", "2")).toBeUndefined();
    expect(cache.size).toBe(1);
    expect(cache.weight).toBe(6);
    // Nine shapes on one set: the oldest view goes, and its weight with it.
    const b = cache.get("ns", "c", "1");
    if (b === undefined) throw new Error("expected a cached set");
    for (let i = 0; i < 8; i++) cache.setView(b, { authority: "h", purpose: `p${i}` }, view);
    expect(cache.weight).toBe(3 * 9);
    expect(viewOf(b, { authority: "h" })).toBeUndefined();
    expect(viewOf(b, { authority: "h", purpose: "p7" })).toBe(view);
    // Namespace and subject are separate keys: ("n", "sc") and ("ns", "c") stay apart.
    cache.set("n", "sc", "1", grants, { authority: "h" }, view);
    expect(cache.get("ns", "c", "1")).toBeDefined();
    expect(cache.get("n", "sc", "1")).toBeDefined();
  });
});
