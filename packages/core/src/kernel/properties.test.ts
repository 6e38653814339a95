import { propertyParameters } from "@tessera/testkit";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { NS, OWNER, rig, T0 } from "../../test/fixtures.js";
import {
  type Capability,
  type GrantInput,
  MESSAGE_NAMESPACE,
  MESSAGE_SEND_ACTION,
  type SendMessageResult,
} from "../index.js";

/**
 * Property tests over random grant sets, contexts and interleavings of sends, revocations and
 * the clock moving. A small model of the rules (written independently of the index) says
 * which grants may authorize a send; the kernel must never deliver outside it, never spend a
 * grant beyond maxUses, write exactly one audit event per decision, and — when sends run one
 * at a time — allow exactly when the model says a grant is available.
 *
 * Seeds: the two properties run on a fresh seed each time (FC_SEED replays one; a failure
 * prints it). Whether the generator reaches both sides of the rules is a fact about the
 * generator, not about one random run, so it is checked on a fixed seed, where it cannot
 * pass or fail by chance.
 */

const RECIPIENTS = ["r0", "r1", "r2", "cell-3", "cell-30"];
const SECOND = 1000;

const capabilityArb: fc.Arbitrary<Capability> = fc.oneof(
  fc
    .record({
      recipient: fc.constantFrom(...RECIPIENTS),
      owner: fc.constantFrom<string | undefined>(OWNER, undefined, "mallory"),
    })
    .map(({ recipient, owner }) => ({
      resource: { namespace: MESSAGE_NAMESPACE, path: [recipient], ...(owner ? { owner } : {}) },
      actions: [MESSAGE_SEND_ACTION],
      scope: "exact" as const,
    })),
  fc.constant<Capability>({
    resource: { namespace: MESSAGE_NAMESPACE, path: [] as string[] },
    actions: [MESSAGE_SEND_ACTION],
    scope: "descendants" as const,
  }),
  fc.constantFrom("files.read", MESSAGE_SEND_ACTION).map((action) => ({
    resource: { namespace: "files", path: ["r0"] },
    actions: [action],
    scope: "exact" as const,
  })),
);

const grantArb = fc
  .record({
    namespaceId: fc.constantFrom(NS, NS, NS, "ns-other"),
    issuer: fc.constantFrom("host", "host", "host", "evil"),
    subject: fc.constantFrom("asker", "asker", "asker", "someone"),
    capabilities: fc.array(capabilityArb, { minLength: 1, maxLength: 3 }),
    maxUses: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }),
    notBefore: fc.option(fc.integer({ min: -2, max: 4 }), { nil: undefined }),
    expiresAt: fc.option(fc.integer({ min: 0, max: 6 }), { nil: undefined }),
    purposes: fc.option(fc.constantFrom<string[]>(["review"], ["review", "hr"], ["hr"]), {
      nil: undefined,
    }),
    revoked: fc.constantFrom(false, false, false, true),
  })
  // A window that closes before it opens is not a grant (the schema refuses it): keep the
  // same two instants, in order, so the generator still hits every position of the clock.
  .map((spec) =>
    spec.notBefore !== undefined && spec.expiresAt !== undefined && spec.notBefore > spec.expiresAt
      ? { ...spec, notBefore: spec.expiresAt, expiresAt: spec.notBefore }
      : spec,
  );
type GrantSpec = typeof grantArb extends fc.Arbitrary<infer T> ? T : never;

const opArb = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant("send" as const),
      to: fc.constantFrom(...RECIPIENTS, "stranger"),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("revoke" as const), index: fc.nat(20) }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("tick" as const),
      seconds: fc.integer({ min: 1, max: 3 }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("newTurn" as const) }) },
);

type Op = typeof opArb extends fc.Arbitrary<infer T> ? T : never;

/** Outcomes counted over a run, so a fixed-seed run can show both sides of every rule. */
type Seen = { delivered: number; denied: number; bounded: number };

function toInput(spec: GrantSpec, id: string): GrantInput {
  const at = (s: number) => new Date(T0 + s * SECOND).toISOString();
  return {
    id,
    namespaceId: spec.namespaceId,
    issuer: spec.issuer,
    subject: spec.subject,
    capabilities: spec.capabilities,
    constraints: {
      ...(spec.maxUses === undefined ? {} : { maxUses: spec.maxUses }),
      ...(spec.notBefore === undefined ? {} : { notBefore: at(spec.notBefore) }),
      ...(spec.expiresAt === undefined ? {} : { expiresAt: at(spec.expiresAt) }),
      ...(spec.purposes === undefined ? {} : { purposes: spec.purposes }),
    },
    issuedAt: at(-10),
  };
}

/** The model: may `spec`, as seen by a turn that read it with `revoked`, authorize a send? */
function modelCovers(
  spec: GrantSpec,
  revoked: boolean,
  to: string,
  now: number,
  purpose: string | undefined,
) {
  if (spec.namespaceId !== NS || spec.issuer !== "host" || spec.subject !== "asker" || revoked)
    return false;
  if (spec.notBefore !== undefined && now < T0 + spec.notBefore * SECOND) return false;
  if (spec.expiresAt !== undefined && now >= T0 + spec.expiresAt * SECOND) return false;
  if (spec.purposes !== undefined && (purpose === undefined || !spec.purposes.includes(purpose)))
    return false;
  return spec.capabilities.some(
    (c) =>
      c.resource.namespace === MESSAGE_NAMESPACE &&
      c.actions.includes(MESSAGE_SEND_ACTION) &&
      (c.resource.owner === undefined || c.resource.owner === OWNER) &&
      (c.scope === "descendants" ? c.resource.path.length === 0 : c.resource.path[0] === to),
  );
}

async function runScenario(
  specs: GrantSpec[],
  ops: readonly Op[],
  purpose: string | undefined,
  concurrent: boolean,
  seen: Seen = { delivered: 0, denied: 0, bounded: 0 },
) {
  const r = rig();
  const ids = specs.map((_, i) => `g${i}`);
  for (const [i, spec] of specs.entries()) {
    await r.grants.add({
      ...toInput(spec, ids[i] as string),
      ...(spec.revoked ? { revokedAt: new Date(T0).toISOString() } : {}),
    });
  }
  const revokedNow = specs.map((s) => s.revoked);
  const context = {
    namespaceId: NS,
    actor: "asker",
    authority: "host",
    owner: OWNER,
    traceId: "p",
    ...(purpose ? { purpose } : {}),
  };
  let turn = await r.kernel.openTurnAuthority(context);
  let revokedInTurn = [...revokedNow];
  const used = specs.map(() => 0);
  let decisions = 0;
  let batch: { to: string; now: number; snapshot: boolean[] }[] = [];

  const check = (to: string, now: number, snapshot: boolean[], result: SendMessageResult) => {
    decisions++;
    if (result.status === "denied") seen.denied++;
    else seen.delivered++;
    if (result.status === "delivered") {
      const index = ids.indexOf(result.grantId);
      const spec = specs[index] as GrantSpec;
      // No delivery without an active, matching grant issued by ctx.authority…
      expect(modelCovers(spec, snapshot[index] as boolean, to, now, purpose)).toBe(true);
      used[index] = (used[index] as number) + 1;
      // …that was unspent.
      if (spec.maxUses !== undefined) {
        seen.bounded++;
        expect(used[index]).toBeLessThanOrEqual(spec.maxUses);
      }
    }
  };
  const expectedWhenSequential = (to: string, now: number) =>
    specs.some(
      (spec, i) =>
        modelCovers(spec, revokedInTurn[i] as boolean, to, now, purpose) &&
        (spec.maxUses === undefined || (used[i] as number) < spec.maxUses),
    );
  const flush = async () => {
    const pending = batch;
    batch = [];
    const results = await Promise.all(
      pending.map((b) => turn.sendMessage({ recipient: b.to, payload: { grants: specs } })),
    );
    results.forEach((result, i) => {
      const b = pending[i] as (typeof pending)[number];
      check(b.to, b.now, b.snapshot, result);
    });
  };

  for (const op of ops) {
    if (op.kind === "send") {
      const now = r.clock.now();
      if (concurrent) batch.push({ to: op.to, now, snapshot: revokedInTurn });
      else {
        const expected = expectedWhenSequential(op.to, now);
        const result = await turn.sendMessage({ recipient: op.to, payload: "q" });
        check(op.to, now, revokedInTurn, result);
        expect(result.status === "delivered").toBe(expected);
      }
      continue;
    }
    await flush();
    if (op.kind === "revoke" && specs.length > 0) {
      const index = op.index % specs.length;
      await r.grants.revoke(specs[index]?.namespaceId as string, ids[index] as string);
      revokedNow[index] = true; // lands on the next turn only
    } else if (op.kind === "tick") r.clock.advance(op.seconds * SECOND);
    else if (op.kind === "newTurn") {
      await turn.close();
      turn = await r.kernel.openTurnAuthority(context);
      revokedInTurn = [...revokedNow];
    }
  }
  await flush();

  expect(r.audit.events).toHaveLength(decisions);
  for (const [i, spec] of specs.entries()) {
    if (spec.maxUses === undefined) continue;
    const usage = await r.usage.getUsage(spec.namespaceId, ids[i] as string);
    expect(usage).toBeLessThanOrEqual(spec.maxUses);
    expect(usage).toBe(used[i]);
    const allowedEvents = r.audit.events.filter(
      (e) => e.outcome === "allowed" && e.grantId === ids[i],
    );
    expect(allowedEvents).toHaveLength(used[i] as number);
  }
  expect(r.transport.delivered).toHaveLength(used.reduce((a, b) => a + b, 0));
}

const scenario = fc.record({
  specs: fc.array(grantArb, { maxLength: 8 }),
  ops: fc.array(opArb, { minLength: 1, maxLength: 30 }),
  purpose: fc.constantFrom<string | undefined>(undefined, "review", "hr", "marketing"),
});

/** Any fixed seed would do; this one is where the coverage below was measured. */
const COVERAGE_SEED = 20_260_101;

describe("kernel properties", () => {
  it("sequential sends: allowed exactly when the model has an available grant; never beyond maxUses", async () => {
    await fc.assert(
      fc.asyncProperty(scenario, ({ specs, ops, purpose }) =>
        runScenario(specs, ops, purpose, false),
      ),
      propertyParameters({ numRuns: 300 }),
    );
  });

  it("concurrent batches: no delivery outside the model, no grant used beyond maxUses, one event per decision", async () => {
    await fc.assert(
      fc.asyncProperty(scenario, ({ specs, ops, purpose }) =>
        runScenario(specs, ops, purpose, true),
      ),
      propertyParameters({ numRuns: 300 }),
    );
  });

  it("the generated worlds are not trivial: on a fixed seed they allow, spend bounded grants and refuse", async () => {
    const seen: Seen = { delivered: 0, denied: 0, bounded: 0 };
    await fc.assert(
      fc.asyncProperty(scenario, ({ specs, ops, purpose }) =>
        runScenario(specs, ops, purpose, false, seen),
      ),
      propertyParameters({ numRuns: 300, seed: COVERAGE_SEED }),
    );
    // Deterministic for this seed: a change here means the generator (or the kernel) changed.
    expect(seen.delivered).toBeGreaterThan(50);
    expect(seen.bounded).toBeGreaterThan(20);
    expect(seen.denied).toBeGreaterThan(50);
  });
});
