import type { Grant } from "../contracts/schemas.js";

/**
 * Grants this library has already parsed with GrantSchema and deeply frozen. A frozen object
 * cannot change, so its validation cannot go stale: a lease reading it again (the in-memory
 * source hands out the same objects every turn) may skip the schema parse. Identity is the
 * proof — a look-alike object from anywhere else is parsed as usual.
 */
const validated = new WeakSet<object>();

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}

/** Freezes a grant that GrantSchema just produced, and remembers it as valid. */
export function sealValidatedGrant(parsed: Grant): Grant {
  deepFreeze(parsed);
  validated.add(parsed);
  return parsed;
}

export function isSealedGrant(value: unknown): value is Grant {
  return typeof value === "object" && value !== null && validated.has(value);
}
