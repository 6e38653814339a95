import { isSafeSegment } from "../contracts/path-segment.js";
import type { ResourceRef } from "./types.js";

/**
 * Hand-written checks for the hot path: requests arrive per decision, so they are checked with
 * a few typeof tests rather than a schema parser (grants, which arrive once per turn, are
 * parsed with the zod schemas). The limits mirror the schemas in contracts/schemas.ts.
 *
 * A request is the caller's object, read while the caller still holds it: a host may reuse it
 * for its next call, and a getter or a Proxy may answer differently on each read. So each field
 * is read once, into a snapshot the kernel owns (see lease-checks.ts `readAuthorize`,
 * `readSend`); the checks run on the snapshot and the decision uses nothing else.
 */

const MAX_ID = 512;
const MAX_SEGMENTS = 64;

/** A field that was present but not well formed, or whose read threw. */
export const MALFORMED: unique symbol = Symbol("malformed");

/** 1 to 512 characters of well-formed text (no lone surrogate: see `isPrintable`). */
export function isId(value: unknown): value is string {
  return (
    typeof value === "string" && value.length > 0 && value.length <= MAX_ID && value.isWellFormed()
  );
}

/** A path segment (or message recipient) as the grant schema allows it: see path-segment.ts. */
export function isSegment(value: unknown): value is string {
  return isId(value) && isSafeSegment(value);
}

export function isResourceRef(value: unknown): value is ResourceRef {
  if (typeof value !== "object" || value === null) return false;
  const { namespace, path, owner } = value as Record<string, unknown>;
  if (!isId(namespace) || (owner !== undefined && !isId(owner))) return false;
  return copyPath(path) !== undefined;
}

export function isOptionalId(value: unknown): value is string | undefined {
  return value === undefined || isId(value);
}

/**
 * A copy of a request's path, each segment read once and checked as read, frozen; undefined
 * when it is not an array of at most 64 safe segments. The copy is what gets decided and
 * audited: the caller's array (or a Proxy over one) is not read again. May throw (a getter, a
 * trap): the caller reads inside try.
 */
export function copyPath(path: unknown): readonly string[] | undefined {
  if (!Array.isArray(path)) return undefined;
  // Copied first (a Proxy's traps answer once each: `length`, then every index), and the copy
  // alone is checked and used. Not frozen: it never leaves the lease.
  const copy: unknown[] = Array.prototype.slice.call(path);
  if (copy.length > MAX_SEGMENTS) return undefined;
  for (let i = 0; i < copy.length; i++) if (!isSegment(copy[i])) return undefined;
  return copy as string[];
}

/**
 * The caller's call ID, read once: a well-formed one, `undefined` when absent (the kernel mints
 * one), or `MALFORMED` when it is not an ID or its read threw (the kernel mints one for the
 * refusal's event).
 */
export function readCallId(request: unknown): string | undefined | typeof MALFORMED {
  if (typeof request !== "object" || request === null) return undefined;
  try {
    const callId: unknown = (request as { callId?: unknown }).callId;
    if (callId === undefined) return undefined;
    return isId(callId) ? callId : MALFORMED;
  } catch {
    return MALFORMED;
  }
}

/** The claim of an act's options, read once; `MALFORMED` when reading it threw. */
export function readClaim<C>(
  options: { readonly claim?: C } | undefined,
): C | undefined | typeof MALFORMED {
  if (options === undefined || options === null) return undefined;
  try {
    return options.claim;
  } catch {
    return MALFORMED;
  }
}
