import { propertyParameters } from "@tessera/testkit";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type Grant, GrantSchema, isTesseraError, messageSendCapability } from "../index.js";
import { isSealedGrant } from "../kernel/validated-grants.js";
import { buildFanoutTickets, type TicketShape } from "./tickets.js";

/**
 * The fast path (one whole parse per shape, the segment rule per recipient) against the path
 * it replaced: every ticket's input built as issuance always built it and parsed on its own by
 * GrantSchema. For random options, valid and not, both refuse or both build the same grants,
 * key for key and in the same key order.
 */

const MINUTE = 60_000;
const T0 = Date.parse("2026-01-01T00:00:00.000Z");

/** IDs of every kind GrantSchema weighs: ordinary, empty, at the 512 bound and past it. */
const idArb = fc.oneof(
  {
    weight: 24,
    arbitrary: fc.constantFrom("ns", "host", "asker", "alice", "bob", "x".repeat(512)),
  },
  { weight: 1, arbitrary: fc.constantFrom("", "x".repeat(513)) },
);

/** Recipient segments: safe ones, and each way a segment is unsafe or out of bounds. */
const SAFE_SEGMENTS = ["a", "b", "cell-3", "cell-30", "Ünïcode", "y".repeat(512), "a b", "%2F"];
const UNSAFE_SEGMENTS = ["", ".", "..", "a/b", "a\\b", "tab\there", "rtl\u202eb", "z".repeat(513)];
const recipientsArb = fc.uniqueArray(
  fc.oneof(
    { weight: 20, arbitrary: fc.constantFrom(...SAFE_SEGMENTS) },
    { weight: 20, arbitrary: fc.string({ minLength: 1, maxLength: 6 }) },
    { weight: 1, arbitrary: fc.constantFrom(...UNSAFE_SEGMENTS) },
  ),
  { maxLength: 16, size: "max" },
);

/** Prefixes near the ID bound, so only the IDs with more index digits overflow it. */
const prefixArb = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom("", "t-", "ticket-") },
  // At 511 characters, only tickets from the tenth on have an ID past the bound.
  { weight: 1, arbitrary: fc.constantFrom(510, 511, 511, 512).map((n) => "p".repeat(n)) },
);

const dateArb = fc.oneof(
  { weight: 18, arbitrary: fc.integer({ min: -5, max: 5 }).map((m) => new Date(T0 + m * MINUTE)) },
  { weight: 1, arbitrary: fc.constant(new Date(Number.NaN)) },
  // Years past 9999 print as "+010000-…", which is no ISO instant GrantSchema accepts.
  { weight: 1, arbitrary: fc.constant(new Date("+010000-01-01T00:00:00.000Z")) },
);

const purposesArb = fc.oneof(
  { weight: 4, arbitrary: fc.constant(undefined) },
  { weight: 4, arbitrary: fc.array(fc.constantFrom("review", "hr", "q"), { maxLength: 3 }) },
  { weight: 1, arbitrary: fc.constant(["ok", ""]) },
  { weight: 1, arbitrary: fc.constant(Array.from({ length: 65 }, (_, i) => `p${i}`)) },
);

const shapeArb: fc.Arbitrary<TicketShape> = fc.record(
  {
    namespaceId: idArb,
    issuer: idArb,
    subject: idArb,
    owner: idArb,
    recipients: recipientsArb,
    idPrefix: prefixArb,
    expiresAt: dateArb,
    purposes: purposesArb,
    issuedAt: dateArb,
  },
  {
    requiredKeys: [
      "namespaceId",
      "issuer",
      "subject",
      "owner",
      "recipients",
      "idPrefix",
      "issuedAt",
    ],
  },
) as fc.Arbitrary<TicketShape>;

/** What issuance did before the fast path: one input per recipient, each parsed whole. */
function parsedOneByOne(shape: TicketShape): Grant[] | "refused" {
  try {
    const issuedAt = shape.issuedAt.toISOString();
    return shape.recipients.map((recipient, index) =>
      GrantSchema.parse({
        id: `${shape.idPrefix}${index}`,
        namespaceId: shape.namespaceId,
        issuer: shape.issuer,
        subject: shape.subject,
        capabilities: [messageSendCapability(recipient, shape.owner)],
        constraints: {
          maxUses: 1,
          ...(shape.expiresAt ? { expiresAt: shape.expiresAt.toISOString() } : {}),
          ...(shape.purposes ? { purposes: [...shape.purposes] } : {}),
        },
        issuedAt,
      }),
    );
  } catch {
    // A ZodError, or the RangeError of an invalid Date's toISOString: refused either way.
    return "refused";
  }
}

function builtOnce(shape: TicketShape): Grant[] | "refused" {
  try {
    return buildFanoutTickets(shape);
  } catch (error) {
    // The fast path refuses only one way; anything else is a bug, not a refusal.
    if (!isTesseraError(error, "invalid_grant")) throw error;
    return "refused";
  }
}

function deeplyFrozen(grant: Grant): boolean {
  return (
    Object.isFrozen(grant) &&
    Object.isFrozen(grant.constraints) &&
    Object.isFrozen(grant.capabilities) &&
    grant.capabilities.every(
      (c) =>
        Object.isFrozen(c) &&
        Object.isFrozen(c.actions) &&
        Object.isFrozen(c.resource) &&
        Object.isFrozen(c.resource.path),
    ) &&
    (grant.constraints.purposes === undefined || Object.isFrozen(grant.constraints.purposes))
  );
}

interface Seen {
  built: number;
  refused: number;
}

function sameAsParsedOneByOne(shape: TicketShape, seen?: Seen): void {
  const reference = parsedOneByOne(shape);
  const fast = builtOnce(shape);
  if (reference === "refused" || fast === "refused") {
    expect(fast).toBe(reference);
    if (seen) seen.refused++;
    return;
  }
  expect(fast).toEqual(reference);
  // Same keys in the same order: a durable store writes the ticket as JSON.
  expect(fast.map((g) => JSON.stringify(g))).toEqual(reference.map((g) => JSON.stringify(g)));
  for (const grant of fast) {
    expect(isSealedGrant(grant)).toBe(true);
    expect(deeplyFrozen(grant)).toBe(true);
  }
  if (seen && fast.length > 0) seen.built++;
}

describe("buildFanoutTickets", () => {
  it("accepts and refuses exactly what parsing every ticket with GrantSchema does, and builds the same grants", () => {
    fc.assert(
      fc.property(shapeArb, (shape) => sameAsParsedOneByOne(shape)),
      propertyParameters({ numRuns: 600 }),
    );
  });

  it("the generated options are not trivial: on a fixed seed many build and many are refused", () => {
    const seen: Seen = { built: 0, refused: 0 };
    fc.assert(
      fc.property(shapeArb, (shape) => sameAsParsedOneByOne(shape, seen)),
      propertyParameters({ numRuns: 600, seed: 20_261_130 }),
    );
    expect(seen.built).toBeGreaterThan(100);
    expect(seen.refused).toBeGreaterThan(100);
  });

  const valid: TicketShape = {
    namespaceId: "ns",
    issuer: "host",
    subject: "asker",
    owner: "alice",
    recipients: ["a", "b"],
    idPrefix: "t-",
    issuedAt: new Date(T0),
  };

  it("checks the longest ID, not the first: only the tenth ticket's ID is past the bound", () => {
    const recipients = Array.from({ length: 11 }, (_, i) => `r${i}`);
    const idPrefix = "p".repeat(511); // p…p0 … p…p9 are 512 long, p…p10 is 513
    expect(
      buildFanoutTickets({ ...valid, recipients: recipients.slice(0, 10), idPrefix }),
    ).toHaveLength(10);
    expect(() => buildFanoutTickets({ ...valid, recipients, idPrefix })).toThrow(
      expect.objectContaining({ code: "invalid_grant" }),
    );
  });

  it("checks every recipient, not only the one it parses whole", () => {
    expect(() => buildFanoutTickets({ ...valid, recipients: ["a", "b", ".."] })).toThrow(
      expect.objectContaining({ code: "invalid_grant" }),
    );
    expect(buildFanoutTickets({ ...valid, recipients: ["a", "b", "c"] })).toHaveLength(3);
  });

  it("names the field a refused ticket fails on, as adding that ticket would", () => {
    const refusalOf = (shape: TicketShape) => {
      try {
        buildFanoutTickets(shape);
      } catch (error) {
        if (isTesseraError(error, "invalid_grant")) return error.message;
        throw error;
      }
      throw new Error("built refused tickets");
    };
    // Before: "the grant does not match the grant schema", whatever the field.
    expect(refusalOf({ ...valid, recipients: ["a", "b", ".."] })).toBe(
      "the grant does not match the grant schema: capabilities.0.resource.path.0: unsafe path segment",
    );
    expect(refusalOf({ ...valid, recipients: ["\u202e", "b"] })).toBe(
      "the grant does not match the grant schema: capabilities.0.resource.path.0: unsafe path segment",
    );
    expect(refusalOf({ ...valid, subject: "" })).toMatch(/ schema: subject: \S/);
    expect(refusalOf({ ...valid, idPrefix: "p".repeat(512) })).toMatch(/ schema: id: \S/);
    expect(refusalOf({ ...valid, purposes: ["ok", ""] })).toMatch(
      / schema: constraints\.purposes\.1: \S/,
    );
  });

  it("refuses a Date that names no time with invalid_grant, not a RangeError", () => {
    for (const bad of [{ issuedAt: new Date(Number.NaN) }, { expiresAt: new Date(Number.NaN) }]) {
      expect(() => buildFanoutTickets({ ...valid, ...bad })).toThrow(
        expect.objectContaining({ code: "invalid_grant" }),
      );
    }
  });

  it("shares nothing a ticket could change: the shared parts are frozen", () => {
    const [one, two] = buildFanoutTickets({ ...valid, purposes: ["review"] });
    expect(one?.constraints).toBe(two?.constraints);
    expect(Object.isFrozen(one?.constraints.purposes)).toBe(true);
    expect(() => {
      (one?.constraints.purposes as string[] | undefined)?.push("marketing");
    }).toThrow(TypeError);
    expect(two?.constraints.purposes).toEqual(["review"]);
  });
});
