import { describe, expect, it } from "vitest";
import { ASKER, cap, ctx, HOST, NS, OWNER, rig, T0 } from "../../test/fixtures.js";
import {
  carveDelegatedUses,
  createKernel,
  deriveGrant,
  explain,
  type Grant,
  type GrantSource,
  InMemoryAuditSink,
  InMemoryGrantStore,
  InMemoryGrantUsageStore,
} from "../index.js";

/**
 * A derived grant counts only while its whole chain resolves through the trusted grant source:
 * host → agent (root) → mid → asker. Each test breaks one link and checks the leaf stops
 * counting from the next turn on, and that audit and explain name the chain.
 */

const iso = (ms: number) => new Date(ms).toISOString();
const READ = { action: "read", resource: { namespace: "files", path: ["cells", "c1"] } };

function root(overrides: Partial<Grant> = {}) {
  return {
    id: "root",
    namespaceId: NS,
    issuer: HOST,
    subject: "agent",
    capabilities: [
      cap(["cells"], { actions: ["read", "write"], scope: "descendants", owner: OWNER }),
    ],
    issuedAt: iso(T0),
    ...overrides,
  };
}

const narrow = (id: string, subject: string) => ({
  id,
  subject,
  capabilities: [cap(["cells"], { actions: ["read"], scope: "descendants", owner: OWNER })],
});

/** root (agent) → mid (held by "mid") → leaf (held by the asker). */
async function chainOfThree(r = rig()) {
  const top = await r.grants.add(root());
  const mid = await r.grants.add(deriveGrant(top, narrow("mid", "mid"), { issuer: "agent" }));
  const leaf = await r.grants.add(deriveGrant(mid, narrow("leaf", ASKER), { issuer: "mid" }));
  return { r, top, mid, leaf };
}

async function decideOnce(r: ReturnType<typeof rig>, callId: string) {
  const turn = await r.kernel.openTurnAuthority(ctx());
  try {
    return await turn.authorize({ ...READ, callId });
  } finally {
    await turn.close();
  }
}

describe("derived grants at turn open", () => {
  it("allow through a resolved chain whose root the turn's authority issued; audit and explain show it", async () => {
    const { r } = await chainOfThree();
    expect(await decideOnce(r, "c1")).toMatchObject({ status: "allowed", grantId: "leaf" });
    const event = r.audit.events.at(-1);
    expect(event?.chain).toEqual(["root", "mid", "leaf"]);
    const told = await explain(r.audit, "c1");
    expect(told.verdict).toBe("allowed");
    expect(told.chain).toEqual(["root", "mid", "leaf"]);
    expect(told.summary).toContain("root → mid → leaf");
  });

  it("revoking any ancestor kills the leaf from the next turn on (an open turn keeps its snapshot)", async () => {
    for (const ancestor of ["root", "mid"]) {
      const { r } = await chainOfThree();
      const open = await r.kernel.openTurnAuthority(ctx());
      await r.grants.revoke(NS, ancestor);
      expect(await open.authorize({ ...READ, callId: "before" })).toMatchObject({
        status: "allowed",
      });
      await open.close();
      expect(await decideOnce(r, "after")).toEqual({ status: "denied", code: "tool_unavailable" });
      expect(r.audit.events.at(-1)?.reason).toBe("revoked");
    }
  });

  it("refuses a chain whose root another authority issued (issuer_mismatch)", async () => {
    const r = rig();
    const top = await r.grants.add(root({ issuer: "someone-else" }));
    await r.grants.add(deriveGrant(top, narrow("leaf", ASKER), { issuer: "agent" }));
    expect(await decideOnce(r, "c")).toMatchObject({ status: "denied" });
    expect(r.audit.events.at(-1)?.reason).toBe("issuer_mismatch");
  });

  it("refuses a derived grant whose parent is missing, or whose link was widened in the store", async () => {
    const r = rig();
    const top = root();
    const orphan = deriveGrant(top as Grant, narrow("leaf", ASKER), { issuer: "agent" });
    await r.grants.add(orphan); // the parent was never added
    expect(await decideOnce(r, "orphan")).toMatchObject({ status: "denied" });
    expect(r.audit.events.at(-1)?.reason).toBe("chain_broken");

    const s = rig();
    await s.grants.add(
      root({ capabilities: [cap(["cells", "c2"], { actions: ["read"], owner: OWNER })] }),
    );
    // Written straight to the store, past deriveGrant: wider than its parent.
    await s.grants.add({
      ...narrow("leaf", ASKER),
      namespaceId: NS,
      issuer: "agent",
      issuedAt: iso(T0),
      parentId: "root",
      depth: 1,
    });
    expect(await decideOnce(s, "wide")).toMatchObject({ status: "denied" });
    expect(s.audit.events.at(-1)?.reason).toBe("chain_broken");
  });

  it("refuses a link whose depth does not follow its parent's", async () => {
    const r = rig();
    const top = await r.grants.add(root());
    const child = deriveGrant(top, narrow("leaf", ASKER), { issuer: "agent" });
    await r.grants.add({ ...child, depth: 2 });
    expect(await decideOnce(r, "d")).toMatchObject({ status: "denied" });
    expect(r.audit.events.at(-1)?.reason).toBe("chain_broken");
  });

  it("fails the turn closed when the source cannot list an ancestor's holder", async () => {
    const { r } = await chainOfThree();
    const source: GrantSource = {
      listGrants: async (ns, subject) => {
        if (subject !== ASKER) throw new Error("down");
        return r.grants.listGrants(ns, subject);
      },
    };
    const kernel = createKernel({ grants: source, audit: new InMemoryAuditSink() });
    const turn = await kernel.openTurnAuthority(ctx());
    expect(await turn.authorize(READ)).toEqual({ status: "denied", code: "authority_unavailable" });
  });

  it("lists each delegator once per turn, however many grants it delegated", async () => {
    const store = new InMemoryGrantStore();
    const top = await store.add(root());
    for (let i = 0; i < 50; i++) {
      await store.add(deriveGrant(top, narrow(`leaf-${i}`, ASKER), { issuer: "agent" }));
    }
    const asked: string[] = [];
    const source: GrantSource = {
      listGrants: async (ns, subject) => {
        asked.push(subject);
        return store.listGrants(ns, subject);
      },
    };
    const kernel = createKernel({ grants: source });
    const turn = await kernel.openTurnAuthority(ctx());
    expect(await turn.authorize(READ)).toMatchObject({ status: "allowed" });
    expect(asked.sort()).toEqual([ASKER, "agent"].sort());
  });

  it("a root grant held by the actor still needs its issuer to be the turn's authority", async () => {
    const r = rig();
    await r.grants.add(root({ subject: ASKER, issuer: "agent" }));
    expect(await decideOnce(r, "x")).toMatchObject({ status: "denied" });
    expect(r.audit.events.at(-1)?.reason).toBe("issuer_mismatch");
  });
});

describe("bounded parents", () => {
  it("uses across the chain never exceed the parent's: the child's budget is carved out of it", async () => {
    const usage = new InMemoryGrantUsageStore();
    const r = rig({ usage });
    const top = await r.grants.add(root({ subject: ASKER, constraints: { maxUses: 3 } }));
    const child = deriveGrant(
      top,
      { ...narrow("child", "helper"), constraints: { maxUses: 2 } },
      { issuer: ASKER },
    );
    await carveDelegatedUses(usage, top, child);
    await r.grants.add(child);
    // The asker keeps one use of its own; the helper has two.
    expect(await decideOnce(r, "own-1")).toMatchObject({ status: "allowed", grantId: "root" });
    expect(await decideOnce(r, "own-2")).toMatchObject({ status: "denied" });
    const helper = await r.kernel.openTurnAuthority(ctx({ actor: "helper" }));
    const results = await Promise.all(
      [1, 2, 3].map((i) => helper.authorize({ ...READ, callId: `h-${i}` })),
    );
    expect(results.filter((x) => x.status === "allowed")).toHaveLength(2);
    expect((await usage.getUsage(NS, "root")) + (await usage.getUsage(NS, "child"))).toBe(3 + 2);
  });
});
