import { isSafeSegment } from "../contracts/path-segment.js";
import type { ResourceRef } from "./types.js";

/**
 * Hand-written checks for the hot path: requests arrive per decision, so they are checked with
 * a few typeof tests rather than a schema parser (grants, which arrive once per turn, are
 * parsed with the zod schemas). The limits mirror the schemas in contracts/schemas.ts.
 */

const MAX_ID = 512;
const MAX_SEGMENTS = 64;

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
  if (!Array.isArray(path) || path.length > MAX_SEGMENTS) return false;
  for (const segment of path) if (!isSegment(segment)) return false;
  return true;
}

export function isOptionalId(value: unknown): value is string | undefined {
  return value === undefined || isId(value);
}
