import { z } from "zod";
import { isSafeSegment } from "./path-segment.js";
import { AUDIT_REASONS, type AuditReason, CALLER_CODES } from "./vocabulary.js";

/**
 * Contracts are schemas; the TypeScript types are inferred from them, so what is checked at
 * runtime and what the compiler believes cannot drift apart. Timestamps are ISO 8601 strings
 * (UTC, "Z") so grants and audit read well as JSON.
 */

/**
 * Text kept in stores and shown to people: no lone surrogate, which UTF-8 cannot hold (a SQLite
 * column or a Redis key turns each into U+FFFD, so two IDs differing only there would meet).
 */
const text = z
  .string()
  .refine((value) => value.isWellFormed(), "not well-formed text (a lone surrogate)");
const id = text.min(1).max(512);

/** The longest delegation chain below a root grant: bounds the walk when a turn opens. */
export const MAX_DELEGATION_DEPTH = 16;
const instant = z.iso.datetime({ offset: false });

/**
 * One path segment. Segments compare whole: `cell-3` never covers `cell-30`. Segments a host
 * could resolve, split or misprint (`..`, `/`, controls …) are refused: see path-segment.ts.
 */
const segment = z.string().min(1).max(512).refine(isSafeSegment, "unsafe path segment");

/**
 * The segment rule on its own, for code that builds many grants of one shape: it parses one
 * whole grant and checks only the segment that varies per grant (see messaging/tickets.ts).
 */
export { segment as PathSegmentSchema };

export const CapabilitySchema = z.strictObject({
  resource: z.strictObject({
    namespace: id,
    path: z.array(segment).max(64),
    owner: id.optional(),
  }),
  actions: z.array(id).min(1).max(64),
  scope: z.enum(["exact", "descendants"]),
});
export type Capability = z.infer<typeof CapabilitySchema>;

export const GrantConstraintsSchema = z
  .strictObject({
    maxUses: z.int().positive().optional(),
    notBefore: instant.optional(),
    expiresAt: instant.optional(),
    purposes: z.array(id).min(1).max(64).optional(),
    /**
     * The deepest a grant derived from this one (directly or further down) may sit in its
     * chain, counting the root as depth 0. Absent means the hard cap, MAX_DELEGATION_DEPTH.
     */
    maxDepth: z.int().min(0).max(MAX_DELEGATION_DEPTH).optional(),
  })
  // A window that closes before it opens is a mistake in the grant, not a grant to keep inert.
  .refine(
    (c) =>
      c.notBefore === undefined ||
      c.expiresAt === undefined ||
      Date.parse(c.notBefore) <= Date.parse(c.expiresAt),
    { message: "notBefore is after expiresAt", path: ["notBefore"] },
  );
export type GrantConstraints = z.infer<typeof GrantConstraintsSchema>;

export const GrantSchema = z
  .strictObject({
    id,
    namespaceId: id,
    issuer: id,
    subject: id,
    capabilities: z.array(CapabilitySchema).min(1).max(1024),
    constraints: GrantConstraintsSchema.default({}),
    /** A grant issued in the future is not yet valid: it counts from this instant on. */
    issuedAt: instant,
    /** Revokes from the moment it is set, whatever instant it names: revocation is never scheduled. */
    revokedAt: instant.optional(),
    /** A derived grant names the grant it was carved from, held by its issuer (see deriveGrant). */
    parentId: id.optional(),
    /** Its place in the chain: the parent's depth plus one (a root grant has none: depth 0). */
    depth: z.int().min(1).max(MAX_DELEGATION_DEPTH).optional(),
  })
  // Half a link cannot be resolved: a derived grant carries both, a root grant neither.
  .refine((g) => (g.parentId === undefined) === (g.depth === undefined), {
    message: "parentId and depth go together",
    path: ["depth"],
  });
export type Grant = z.infer<typeof GrantSchema>;
/** What a host hands to `GrantSource.add`: constraints may be left out. */
export type GrantInput = z.input<typeof GrantSchema>;

export const AccessContextSchema = z.strictObject({
  namespaceId: id,
  actor: id,
  /** Who vouches for this turn: a grant counts only if its issuer equals this. */
  authority: id,
  owner: id.optional(),
  purpose: id.optional(),
  traceId: id,
  /** Fixes the decision instant for the whole turn; the kernel's clock is used otherwise. */
  now: instant.optional(),
});
export type AccessContext = z.infer<typeof AccessContextSchema>;

const reasonNames = Object.keys(AUDIT_REASONS) as [AuditReason, ...AuditReason[]];

/** One decision, allowed or refused, by the kernel or the gate. */
export const AuditEventSchema = z.strictObject({
  at: instant,
  source: z.enum(["kernel", "gate"]),
  outcome: z.enum(["allowed", "denied"]),
  /** Caller-facing code of a refusal; null when allowed. */
  code: z.enum(CALLER_CODES).nullable(),
  reason: z.enum(reasonNames),
  traceId: z.string(),
  callId: z.string(),
  namespaceId: z.string().optional(),
  actor: z.string().optional(),
  authority: z.string().optional(),
  /** The turn's owner: with namespaceId, actor and authority, the principal of the decision. */
  owner: z.string().optional(),
  /** The purpose the act was decided under (metadata of the turn, never payload). */
  purpose: z.string().optional(),
  grantId: z.string().optional(),
  /** A decision under a derived grant: the grant IDs of its chain, root first, `grantId` last. */
  chain: z
    .array(z.string())
    .max(MAX_DELEGATION_DEPTH + 1)
    .optional(),
  action: z.string().optional(),
  /** Resource as `namespace:/seg/seg`, for people. */
  resource: z.string().optional(),
  /** Gate events: the trusted host session and the receipt it produced. */
  session: z.string().optional(),
  receipt: z.string().optional(),
  detail: z.string().optional(),
  /**
   * The hash chain, set by the sink that stores the event (see `audit/chain.ts`): position in
   * the stream from 1, the previous event's hash, and this event's own hash.
   */
  seq: z.number().int().positive().optional(),
  prev: z
    .string()
    .regex(/^[0-9a-f]{64}$/)
    .optional(),
  hash: z
    .string()
    .regex(/^[0-9a-f]{64}$/)
    .optional(),
});
export type AuditEvent = z.infer<typeof AuditEventSchema>;
