import { describe, expect, it } from "vitest";
import { ASKER, cap, ctx, grant, NS, rig, T0 } from "../../test/fixtures.js";
import {
  addDerivedGrant,
  carveDelegatedUses,
  type DerivationRequest,
  deriveGrant,
  type Grant,
  GrantSchema,
  InMemoryGrantStore,
  InMemoryGrantUsageStore,
  isTesseraError,
  TesseraError,
} from "../index.js";

const iso = (ms: number) => new Date(ms).toISOString();
const HOUR = 3_600_000;

/** A parent held by "agent", issued by the host, with a limit on every axis a child can widen. */
function parent(overrides: Partial<Grant> = {}): Grant {
  return GrantSchema.parse({
    id: "p",
    namespaceId: NS,
    issuer: "host",
    subject: "agent",
    capabilities: [
      cap(["cells"], { actions: ["read", "write"], scope: "descendants", owner: "alice" }),
      cap(["cell-3"], { actions: ["read"], owner: "alice" }),
      cap(["reports"], { actions: ["list"], owner: "alice" }),
    ],
    constraints: {
      maxUses: 10,
      notBefore: iso(T0),
      expiresAt: iso(T0 + 10 * HOUR),
      purposes: ["triage", "billing"],
      maxDepth: 3,
    },
    issuedAt: iso(T0),
    ...overrides,
  });
}

/** A request inside the parent on every axis: each test widens exactly one. */
function request(overrides: Partial<DerivationRequest> = {}): DerivationRequest {
  return {
    id: "c",
    subject: "sub-agent",
    capabilities: [cap(["cells", "a"], { actions: ["read"], owner: "alice" })],
    constraints: {
      maxUses: 2,
      notBefore: iso(T0 + HOUR),
      expiresAt: iso(T0 + 2 * HOUR),
      purposes: ["triage"],
      maxDepth: 3,
    },
    ...overrides,
  };
}

function codeOf(run: () => unknown): string | undefined {
  try {
    run();
  } catch (error) {
    if (isTesseraError(error)) return error.code;
    throw error;
  }
  return undefined;
}

const constraints = request().constraints ?? {};

describe("deriveGrant", () => {
  it("returns a frozen child: delegate as subject, delegator as issuer, parent and depth recorded", () => {
    const child = deriveGrant(parent(), request(), { issuer: "agent" });
    expect(child).toMatchObject({
      id: "c",
      namespaceId: NS,
      subject: "sub-agent",
      issuer: "agent",
      parentId: "p",
      depth: 1,
      issuedAt: iso(T0),
    });
    expect(Object.isFrozen(child)).toBe(true);
    const grandchild = deriveGrant(
      child,
      { ...request(), id: "gc", subject: "third" },
      {
        issuer: "sub-agent",
      },
    );
    expect(grandchild.depth).toBe(2);
    expect(grandchild.parentId).toBe("c");
  });

  // One row per axis: the request is narrower everywhere except the one named.
  it.each<[string, () => unknown]>([
    ["delegation_not_holder", () => deriveGrant(parent(), request(), { issuer: "someone" })],
    [
      "delegation_parent_revoked",
      () => deriveGrant(parent({ revokedAt: iso(T0) }), request(), { issuer: "agent" }),
    ],
    [
      "delegation_wider_path",
      // A sibling: cell-3 is granted, cell-30 is not, and neither covers the other.
      () =>
        deriveGrant(
          parent(),
          request({ capabilities: [cap(["cell-30"], { actions: ["read"], owner: "alice" })] }),
          {
            issuer: "agent",
          },
        ),
    ],
    [
      "delegation_wider_path",
      // Wider: the parent holds descendants of /cells, not /cells's parent.
      () =>
        deriveGrant(
          parent(),
          request({
            capabilities: [cap([], { actions: ["read"], scope: "descendants", owner: "alice" })],
          }),
          { issuer: "agent" },
        ),
    ],
    [
      "delegation_wider_path",
      () =>
        deriveGrant(
          parent(),
          request({
            capabilities: [
              cap(["cells", "a"], { actions: ["read"], owner: "alice", namespace: "mail" }),
            ],
          }),
          { issuer: "agent" },
        ),
    ],
    [
      "delegation_wider_scope",
      () =>
        deriveGrant(
          parent(),
          request({
            capabilities: [
              cap(["cell-3"], { actions: ["read"], scope: "descendants", owner: "alice" }),
            ],
          }),
          { issuer: "agent" },
        ),
    ],
    [
      "delegation_wider_action",
      () =>
        deriveGrant(
          parent(),
          request({ capabilities: [cap(["cell-3"], { actions: ["write"], owner: "alice" })] }),
          {
            issuer: "agent",
          },
        ),
    ],
    [
      "delegation_other_owner",
      () =>
        deriveGrant(
          parent(),
          request({ capabilities: [cap(["cell-3"], { actions: ["read"], owner: "bob" })] }),
          {
            issuer: "agent",
          },
        ),
    ],
    [
      "delegation_other_owner",
      // No owner means any owner: dropping the parent's is wider.
      () =>
        deriveGrant(parent(), request({ capabilities: [cap(["cell-3"], { actions: ["read"] })] }), {
          issuer: "agent",
        }),
    ],
    [
      "delegation_assembled_capability",
      // read+list on /reports: the parent has list there, and read only via other capabilities
      // whose path differs — so take a resource two parent capabilities both reach.
      () =>
        deriveGrant(
          parent({
            capabilities: [
              cap(["x"], { actions: ["read"], owner: "alice" }),
              cap(["x"], { actions: ["write"], owner: "alice" }),
            ],
          }),
          request({ capabilities: [cap(["x"], { actions: ["read", "write"], owner: "alice" })] }),
          { issuer: "agent" },
        ),
    ],
    [
      "delegation_wider_purpose",
      () =>
        deriveGrant(
          parent(),
          request({ constraints: { ...constraints, purposes: ["triage", "sales"] } }),
          {
            issuer: "agent",
          },
        ),
    ],
    [
      "delegation_wider_purpose",
      () =>
        deriveGrant(parent(), request({ constraints: { ...constraints, purposes: undefined } }), {
          issuer: "agent",
        }),
    ],
    [
      "delegation_wider_window",
      () =>
        deriveGrant(
          parent(),
          request({ constraints: { ...constraints, expiresAt: iso(T0 + 11 * HOUR) } }),
          {
            issuer: "agent",
          },
        ),
    ],
    [
      "delegation_wider_window",
      () =>
        deriveGrant(parent(), request({ constraints: { ...constraints, expiresAt: undefined } }), {
          issuer: "agent",
        }),
    ],
    [
      "delegation_wider_window",
      () =>
        deriveGrant(
          parent(),
          request({
            issuedAt: iso(T0 - HOUR),
            constraints: { ...constraints, notBefore: undefined },
          }),
          { issuer: "agent" },
        ),
    ],
    [
      "delegation_wider_uses",
      () =>
        deriveGrant(parent(), request({ constraints: { ...constraints, maxUses: 11 } }), {
          issuer: "agent",
        }),
    ],
    [
      "delegation_wider_uses",
      () =>
        deriveGrant(parent(), request({ constraints: { ...constraints, maxUses: undefined } }), {
          issuer: "agent",
        }),
    ],
    [
      "delegation_too_deep",
      () =>
        deriveGrant(parent(), request({ constraints: { ...constraints, maxDepth: 4 } }), {
          issuer: "agent",
        }),
    ],
    [
      "delegation_too_deep",
      () =>
        deriveGrant(
          parent({ constraints: { ...parent().constraints, maxDepth: 0 } }),
          request({ constraints: { ...constraints, maxDepth: 0 } }),
          {
            issuer: "agent",
          },
        ),
    ],
  ])("refuses %s rather than clamping", (code, run) => {
    expect(codeOf(run)).toBe(code);
  });

  it("stops a chain at maxDepth: depth 3 derives nothing under maxDepth 3", () => {
    let current = parent();
    let holder = "agent";
    for (let depth = 1; depth <= 3; depth++) {
      const next = `agent-${depth}`;
      current = deriveGrant(
        current,
        { ...request(), id: `c${depth}`, subject: next },
        { issuer: holder },
      );
      holder = next;
    }
    expect(current.depth).toBe(3);
    expect(codeOf(() => deriveGrant(current, { ...request(), id: "c4" }, { issuer: holder }))).toBe(
      "delegation_too_deep",
    );
  });

  it("refuses a malformed request with invalid_grant, never a half-built child", () => {
    expect(
      codeOf(() => deriveGrant(parent(), request({ capabilities: [] }), { issuer: "agent" })),
    ).toBe("invalid_grant");
  });

  it("names where a malformed request first fails the schema, redacting request text", () => {
    const messageOf = (bad: DerivationRequest) => {
      try {
        deriveGrant(parent(), bad, { issuer: "agent" });
      } catch (error) {
        if (isTesseraError(error) && error.code === "invalid_grant") return error.message;
        throw error;
      }
      throw new Error("derived a malformed request");
    };
    const [first] = request().capabilities;
    const asString = {
      ...first,
      actions: "read",
    } as unknown as DerivationRequest["capabilities"][number];
    // Before: "the grant does not match the grant schema", whatever the field.
    expect(messageOf(request({ capabilities: [asString] }))).toMatch(
      /^the grant does not match the grant schema: capabilities\.0\.actions: /,
    );
    expect(messageOf(request({ capabilities: [] }))).toMatch(/schema: capabilities: /);
    expect(messageOf({ ...request(), subject: 7 } as unknown as DerivationRequest)).toMatch(
      /schema: subject: /,
    );
    // A key the schema does not know is the request's own text: redacted as an ID is.
    const stray = { ...first, ["x\u202e".repeat(3)]: 1 } as unknown as typeof asString;
    const message = messageOf(request({ capabilities: [stray] }));
    expect(message).toBe(
      "the grant does not match the grant schema: capabilities.0: unrecognized key <6 chars>",
    );
  });

  it("refuses a key the request does not know, naming it (redacted), as adding a grant does", () => {
    const refusalOf = (extra: Record<string, unknown>) => {
      try {
        deriveGrant(parent(), { ...request(), ...extra } as DerivationRequest, { issuer: "agent" });
      } catch (error) {
        if (isTesseraError(error, "invalid_grant")) return error.message;
        throw error;
      }
      // Before: the key was dropped and the child derived.
      throw new Error("derived a request with a key it does not know");
    };
    expect(refusalOf({ extra: 1 })).toBe(
      "the grant does not match the grant schema: (root): unrecognized key extra",
    );
    // A grant field the delegator may not set is no request key either: never silently dropped.
    expect(refusalOf({ namespaceId: "elsewhere" })).toMatch(
      /: \(root\): unrecognized key namespaceId$/,
    );
    expect(refusalOf({ parentId: "q", depth: 1 })).toMatch(/unrecognized key parentId, depth$/);
    expect(refusalOf({ ["x\u202e".repeat(3)]: 1 })).toBe(
      "the grant does not match the grant schema: (root): unrecognized key <6 chars>",
    );
    // Every key the request does know still derives.
    expect(
      deriveGrant(parent(), { ...request(), issuedAt: iso(T0) }, { issuer: "agent" }).parentId,
    ).toBe("p");
  });
});

describe("addDerivedGrant", () => {
  const child = (p: Grant, id: string) =>
    deriveGrant(p, request({ id, constraints: { ...constraints, maxUses: 2 } }), {
      issuer: "agent",
    });

  it("adds the child with its uses carved; a child the store refuses gets them back", async () => {
    const usage = new InMemoryGrantUsageStore();
    const grants = new InMemoryGrantStore();
    const p = parent();
    await grants.add(p);
    await addDerivedGrant(grants, usage, p, child(p, "kid"));
    expect(await usage.getUsage(NS, "p")).toBe(2);
    // The same child ID again (a second derive racing the first): refused, nothing carved.
    await expect(addDerivedGrant(grants, usage, p, child(p, "kid"))).rejects.toMatchObject({
      code: "invalid_grant",
    });
    expect(await usage.getUsage(NS, "p")).toBe(2);
    await addDerivedGrant(grants, usage, p, child(p, "kid-2"));
    expect(await usage.getUsage(NS, "p")).toBe(4);
  });

  it("keeps the uses spent when the store's answer is lost: the child may exist", async () => {
    const usage = new InMemoryGrantUsageStore();
    const p = parent();
    const lost = {
      add: async () => {
        throw new TesseraError("grant_store_unavailable", "connection lost");
      },
    };
    await expect(addDerivedGrant(lost, usage, p, child(p, "kid"))).rejects.toMatchObject({
      code: "grant_store_unavailable",
    });
    expect(await usage.getUsage(NS, "p")).toBe(2);
  });

  it("uses given back after a refused child are usable at once by a kernel that saw them spent", async () => {
    const r = rig();
    const p = GrantSchema.parse(
      grant({ id: "p2", capabilities: [cap(["a"])], constraints: { maxUses: 2 } }),
    );
    await r.grants.add(p);
    const kid = deriveGrant(
      p,
      { id: "kid", subject: "bob", capabilities: [cap(["a"])], constraints: { maxUses: 2 } },
      { issuer: ASKER },
    );
    const read = { action: "files.read", resource: { namespace: "files", path: ["a"] } };
    let refuse = () => {};
    const stored = new Promise<void>((resolve) => {
      refuse = resolve;
    });
    // The store answers only after the kernel has decided on the parent with both uses carved.
    const racing = {
      add: async (): Promise<Grant> => {
        await stored;
        throw new TesseraError("invalid_grant", "grant kid already exists");
      },
    };
    const adding = addDerivedGrant(racing, r.usage, p, kid);
    await expect.poll(() => r.usage.getUsage(NS, "p2")).toBe(2);
    const meanwhile = await r.kernel.openTurnAuthority(ctx());
    expect((await meanwhile.authorize(read)).status).toBe("denied");
    refuse();
    await expect(adding).rejects.toMatchObject({ code: "invalid_grant" });
    expect(await r.usage.getUsage(NS, "p2")).toBe(0);
    const after = await r.kernel.openTurnAuthority(ctx());
    expect((await after.authorize(read)).status).toBe("allowed");
    expect((await after.authorize(read)).status).toBe("allowed");
    expect((await after.authorize(read)).status).toBe("denied");
  });
});

describe("carveDelegatedUses", () => {
  it("spends the child's uses of the parent all at once, and refuses when fewer are left", async () => {
    const usage = new InMemoryGrantUsageStore();
    const p = parent();
    const four = deriveGrant(
      p,
      request({ id: "four", constraints: { ...constraints, maxUses: 4 } }),
      {
        issuer: "agent",
      },
    );
    await carveDelegatedUses(usage, p, four);
    await carveDelegatedUses(
      usage,
      p,
      deriveGrant(p, request({ id: "four-b", constraints: { ...constraints, maxUses: 4 } }), {
        issuer: "agent",
      }),
    );
    expect(await usage.getUsage(NS, "p")).toBe(8);
    const three = deriveGrant(
      p,
      request({ id: "three", constraints: { ...constraints, maxUses: 3 } }),
      {
        issuer: "agent",
      },
    );
    await expect(carveDelegatedUses(usage, p, three)).rejects.toMatchObject({
      code: "delegation_budget_exhausted",
    });
    // All or nothing: the refused carve spent none of the two uses left.
    expect(await usage.getUsage(NS, "p")).toBe(8);
  });

  it("carves nothing from an unbounded parent, and refuses a child of another parent", async () => {
    const usage = new InMemoryGrantUsageStore();
    const p = parent({ constraints: { ...parent().constraints, maxUses: undefined } });
    const child = deriveGrant(p, request(), { issuer: "agent" });
    await carveDelegatedUses(usage, p, child);
    expect(await usage.getUsage(NS, "p")).toBe(0);
    await expect(carveDelegatedUses(usage, parent({ id: "other" }), child)).rejects.toMatchObject({
      code: "invalid_input",
    });
  });
});
