import { propertyParameters } from "@tessera/testkit";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { NS, T0 } from "../../test/fixtures.js";
import {
  type Capability,
  type DerivationRequest,
  deriveGrant,
  type Grant,
  GrantSchema,
  isTesseraError,
} from "../index.js";

/**
 * For random parents and requests: a derived grant allows a subset of what its parent allows,
 * checked by enumerating every request in a small universe (resource, owner, action, purpose,
 * instant); and a refused derivation names an axis that really widened, checked by an oracle
 * written over the same enumeration, not over the implementation's capability matching.
 */

const NAMESPACES = ["files", "mail"];
const SEGMENTS = ["a", "b", "cell-3", "cell-30"];
const ACTIONS = ["read", "write", "list"];
const OWNERS = ["alice", "bob"];
const PURPOSES = ["p1", "p2", "p3"];
const MINUTE = 60_000;
const iso = (ms: number) => new Date(ms).toISOString();

const pathArb = fc.array(fc.constantFrom(...SEGMENTS), { maxLength: 2 });
const capabilityArb: fc.Arbitrary<Capability> = fc.record({
  resource: fc.record(
    {
      namespace: fc.constantFrom(...NAMESPACES),
      path: pathArb,
      owner: fc.constantFrom(...OWNERS),
    },
    { requiredKeys: ["namespace", "path"] },
  ),
  actions: fc.subarray(ACTIONS, { minLength: 1 }),
  scope: fc.constantFrom("exact" as const, "descendants" as const),
});
const constraintsArb = fc
  .record(
    {
      maxUses: fc.integer({ min: 1, max: 5 }),
      notBefore: fc.integer({ min: 0, max: 4 }).map((m) => iso(T0 + m * MINUTE)),
      expiresAt: fc.integer({ min: 5, max: 9 }).map((m) => iso(T0 + m * MINUTE)),
      purposes: fc.subarray(PURPOSES, { minLength: 1 }),
      maxDepth: fc.integer({ min: 0, max: 4 }),
    },
    { requiredKeys: [] },
  )
  .map((c) => Object.fromEntries(Object.entries(c).filter(([, v]) => v !== undefined)));

const parentArb: fc.Arbitrary<Grant> = fc
  .record({
    capabilities: fc.array(capabilityArb, { minLength: 1, maxLength: 3 }),
    constraints: constraintsArb,
    issuedAt: fc.integer({ min: 0, max: 2 }).map((m) => iso(T0 + m * MINUTE)),
  })
  .map((g) =>
    GrantSchema.parse({ id: "parent", namespaceId: NS, issuer: "host", subject: "agent", ...g }),
  );

/** Requests drawn near the parent (its own capabilities, narrowed or not) and at random. */
function requestArb(parent: Grant): fc.Arbitrary<DerivationRequest> {
  const near = fc.constantFrom(...parent.capabilities).chain((c) =>
    fc.record({
      resource: fc.record(
        {
          namespace: fc.constantFrom(c.resource.namespace, ...NAMESPACES),
          path: fc.oneof(
            fc.constant(c.resource.path),
            pathArb.map((tail) => [...c.resource.path, ...tail].slice(0, 3)),
            pathArb,
          ),
          owner: fc.constantFrom(...(c.resource.owner ? [c.resource.owner] : []), ...OWNERS),
        },
        { requiredKeys: ["namespace", "path"] },
      ),
      actions: fc.oneof(
        fc.subarray(c.actions, { minLength: 1 }),
        fc.subarray(ACTIONS, { minLength: 1 }),
      ),
      scope: fc.constantFrom(c.scope, "exact" as const, "descendants" as const),
    }),
  );
  return fc.record({
    id: fc.constant("child"),
    subject: fc.constant("delegate"),
    capabilities: fc.array(fc.oneof(near, near, capabilityArb), { minLength: 1, maxLength: 2 }),
    constraints: fc.oneof(fc.constant(parent.constraints), constraintsArb),
    issuedAt: fc.integer({ min: 0, max: 3 }).map((m) => iso(T0 + m * MINUTE)),
  });
}

// --- The enumeration: one request is (namespace, path, owner, action). -----------------------

interface Point {
  namespace: string;
  path: string[];
  /** Undefined: a turn acting for nobody, which only an owner-less capability serves. */
  owner: string | undefined;
  action: string;
}

function allPaths(depth: number): string[][] {
  const out: string[][] = [[]];
  let layer: string[][] = [[]];
  for (let d = 0; d < depth; d++) {
    layer = layer.flatMap((p) => SEGMENTS.map((s) => [...p, s]));
    out.push(...layer);
  }
  return out;
}
const POINTS: Point[] = allPaths(4).flatMap((path) =>
  NAMESPACES.flatMap((namespace) =>
    // Owners no capability names are points too: an owner-less capability serves them.
    [...OWNERS, "carol", undefined].flatMap((owner) =>
      ACTIONS.map((action) => ({ namespace, path, owner, action })),
    ),
  ),
);

function capServes(c: Capability, p: Point, ignoreAction = false, ignoreOwner = false): boolean {
  if (c.resource.namespace !== p.namespace) return false;
  const cp = c.resource.path;
  if (c.scope === "exact" ? cp.length !== p.path.length : cp.length > p.path.length) return false;
  if (!cp.every((s, i) => s === p.path[i])) return false;
  if (!ignoreOwner && c.resource.owner !== undefined && c.resource.owner !== p.owner) return false;
  return ignoreAction || c.actions.includes(p.action);
}

const grantServes = (g: Grant, p: Point) => g.capabilities.some((c) => capServes(c, p));

function purposesAllowed(g: Grant): (string | undefined)[] {
  const all = [undefined, ...PURPOSES];
  const ps = g.constraints.purposes;
  return ps === undefined ? all : all.filter((p) => p !== undefined && ps.includes(p));
}

const INSTANTS = Array.from({ length: 24 }, (_, i) => T0 + (i - 2) * MINUTE);
const instantsCaps = INSTANTS.flatMap((t) => [t - 1, t]);
function inWindow(g: Grant, t: number): boolean {
  const opens = Math.max(Date.parse(g.issuedAt), Date.parse(g.constraints.notBefore ?? g.issuedAt));
  const closes = g.constraints.expiresAt ? Date.parse(g.constraints.expiresAt) : Infinity;
  return t >= opens && t < closes;
}

// --- The oracle: did this axis widen? -----------------------------------------------------

const servedByChild = (child: Grant) =>
  child.capabilities.flatMap((c) => POINTS.filter((p) => capServes(c, p)).map((p) => ({ c, p })));

const ORACLE: Record<string, (parent: Grant, child: Grant) => boolean> = {
  // Location: a resource some child capability reaches that no parent capability reaches.
  delegation_wider_path: (parent, child) => locationWidened(parent, child),
  delegation_wider_scope: (parent, child) => locationWidened(parent, child),
  delegation_other_owner: (parent, child) =>
    servedByChild(child).some(
      ({ p }) => !parent.capabilities.some((c) => capServes(c, p, true, false)),
    ),
  delegation_wider_action: (parent, child) =>
    servedByChild(child).some(({ p }) => !grantServes(parent, p)),
  // Every point is served, but no single parent capability serves all of one child's.
  delegation_assembled_capability: (parent, child) =>
    child.capabilities.some((cc) => {
      const points = POINTS.filter((p) => capServes(cc, p));
      return !parent.capabilities.some((pc) => points.every((p) => capServes(pc, p)));
    }),
  delegation_wider_purpose: (parent, child) => {
    const allowed = purposesAllowed(parent);
    return purposesAllowed(child).some((p) => !allowed.includes(p));
  },
  delegation_wider_window: (parent, child) =>
    instantsCaps.some((t) => inWindow(child, t) && !inWindow(parent, t)) ||
    (child.constraints.expiresAt === undefined && parent.constraints.expiresAt !== undefined),
  delegation_wider_uses: (parent, child) =>
    (child.constraints.maxUses ?? Infinity) > (parent.constraints.maxUses ?? Infinity),
  delegation_too_deep: (parent, child) => {
    const limit = parent.constraints.maxDepth ?? 16;
    return (child.depth ?? 1) > limit || (child.constraints.maxDepth ?? 16) > limit;
  },
};

function locationWidened(parent: Grant, child: Grant): boolean {
  return servedByChild(child).some(
    ({ p }) => !parent.capabilities.some((c) => capServes(c, p, true, true)),
  );
}

/** The child the request would have made, had nothing been checked (for the oracle). */
function unchecked(parent: Grant, request: DerivationRequest): Grant | undefined {
  const parsed = GrantSchema.safeParse({
    ...request,
    namespaceId: NS,
    issuer: "agent",
    parentId: parent.id,
    depth: Math.min((parent.depth ?? 0) + 1, 16),
  });
  return parsed.success ? parsed.data : undefined;
}

const withRequest = parentArb.chain((parent) =>
  fc.record({ parent: fc.constant(parent), request: requestArb(parent) }),
);

describe("deriveGrant properties", () => {
  it("every derived grant allows a subset of its parent; every refusal names a widened axis", () => {
    let derived = 0;
    let refused = 0;
    fc.assert(
      fc.property(withRequest, ({ parent, request }) => {
        let child: Grant;
        try {
          child = deriveGrant(parent, request, { issuer: "agent" });
        } catch (error) {
          if (!isTesseraError(error)) throw error;
          if (error.code === "invalid_grant") return;
          refused++;
          const oracle = ORACLE[error.code];
          expect(oracle, `unexpected code ${error.code}`).toBeDefined();
          const would = unchecked(parent, request) as Grant;
          expect(would).toBeDefined();
          expect(oracle?.(parent, would), `${error.code} names an axis that did not widen`).toBe(
            true,
          );
          return;
        }
        derived++;
        for (const point of POINTS) {
          if (!grantServes(child, point)) continue;
          expect(grantServes(parent, point)).toBe(true);
        }
        for (const purpose of purposesAllowed(child)) {
          expect(purposesAllowed(parent)).toContain(purpose);
        }
        for (const t of instantsCaps)
          if (inWindow(child, t)) expect(inWindow(parent, t)).toBe(true);
        expect(child.constraints.maxUses ?? Infinity).toBeLessThanOrEqual(
          parent.constraints.maxUses ?? Infinity,
        );
      }),
      propertyParameters({ numRuns: 400 }),
    );
    // The generator reaches both sides, or the property says little.
    expect(derived).toBeGreaterThan(0);
    expect(refused).toBeGreaterThan(0);
  });

  it("each single-axis widening of an accepted request is refused with that axis's code", () => {
    fc.assert(
      fc.property(withRequest, ({ parent, request }) => {
        let child: Grant;
        try {
          child = deriveGrant(parent, request, { issuer: "agent" });
        } catch {
          return;
        }
        const first = child.capabilities[0] as Capability;
        const rest = child.capabilities.slice(1);
        const base = {
          ...request,
          capabilities: child.capabilities,
          constraints: child.constraints,
        };
        const mutations: [string, DerivationRequest | undefined][] = [
          [
            "delegation_wider_action",
            ACTIONS.some((a) => !parent.capabilities.some((c) => c.actions.includes(a)))
              ? {
                  ...base,
                  capabilities: [
                    {
                      ...first,
                      actions: [
                        ...first.actions,
                        ACTIONS.find(
                          (a) => !parent.capabilities.some((c) => c.actions.includes(a)),
                        ) as string,
                      ],
                    },
                    ...rest,
                  ],
                }
              : undefined,
          ],
          [
            "delegation_wider_uses",
            parent.constraints.maxUses === undefined
              ? undefined
              : {
                  ...base,
                  constraints: { ...child.constraints, maxUses: parent.constraints.maxUses + 1 },
                },
          ],
          [
            "delegation_wider_purpose",
            parent.constraints.purposes === undefined
              ? undefined
              : { ...base, constraints: { ...child.constraints, purposes: undefined } },
          ],
          [
            "delegation_wider_window",
            parent.constraints.expiresAt === undefined
              ? undefined
              : {
                  ...base,
                  constraints: {
                    ...child.constraints,
                    expiresAt: iso(Date.parse(parent.constraints.expiresAt) + 1),
                  },
                },
          ],
        ];
        for (const [code, mutated] of mutations) {
          if (mutated === undefined) continue;
          let got: string | undefined;
          try {
            deriveGrant(parent, mutated, { issuer: "agent" });
          } catch (error) {
            got = isTesseraError(error) ? error.code : String(error);
          }
          expect(got).toBe(code);
        }
      }),
      propertyParameters({ numRuns: 300 }),
    );
  });
});
