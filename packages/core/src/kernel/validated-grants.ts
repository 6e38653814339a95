import type { Grant } from "../contracts/schemas.js";

/**
 * Grants this library has already validated — parsed with GrantSchema, or built from parts
 * GrantSchema checked (fan-out tickets, see messaging/tickets.ts) — and deeply frozen. A
 * frozen object cannot change, so its validation cannot go stale: a lease reading it again
 * (the in-memory source hands out the same objects every turn) may skip the schema parse.
 * Identity is the proof — a look-alike object from anywhere else is parsed as usual.
 */
const validated = new WeakSet<object>();

/** Freezes every object of a parsed grant, walking its known shape (cheaper than reflection). */
function freezeGrant(grant: Grant): void {
  for (const capability of grant.capabilities) {
    Object.freeze(capability.resource.path);
    Object.freeze(capability.resource);
    Object.freeze(capability.actions);
    Object.freeze(capability);
  }
  Object.freeze(grant.capabilities);
  if (grant.constraints.purposes) Object.freeze(grant.constraints.purposes);
  Object.freeze(grant.constraints);
  Object.freeze(grant);
}

/**
 * Freezes a grant that GrantSchema just produced (or one built from parts it validated, with
 * the same keys in the same order), and remembers it as valid. Stores take a sealed grant as
 * it is (`parseGrantInput`), and leases skip its parse.
 */
export function sealValidatedGrant(parsed: Grant): Grant {
  freezeGrant(parsed);
  validated.add(parsed);
  return parsed;
}

export function isSealedGrant(value: unknown): value is Grant {
  return typeof value === "object" && value !== null && validated.has(value);
}
