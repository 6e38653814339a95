import { randomUUID } from "node:crypto";
import { TesseraError } from "../contracts/errors.js";
import type { Grant } from "../contracts/schemas.js";
import type { GrantStore } from "../ports/grant-source.js";
import { buildFanoutTickets } from "./tickets.js";

export interface FanoutTicketOptions {
  readonly namespaceId: string;
  /** Must equal the `authority` of the asker's turns, or the tickets never count. */
  readonly issuer: string;
  /** The asking agent. */
  readonly subject: string;
  /** On whose behalf the asker writes; recipients' resources are owned by them. */
  readonly owner: string;
  readonly recipients: readonly string[];
  /** Grant IDs are `<idPrefix><index>`; a fresh random prefix by default. */
  readonly idPrefix?: string;
  readonly expiresAt?: Date;
  readonly purposes?: readonly string[];
  /** Issue time; now by default. */
  readonly issuedAt?: Date;
}

/**
 * Issues one single-use ticket per recipient — N authorizations for N recipients, never one
 * shared budget. Duplicate recipients are refused: two tickets for one colleague would let
 * the question be asked twice.
 *
 * Every ticket is validated before any reaches the store (one refused recipient issues none),
 * once per shape rather than once per ticket (see tickets.ts), and handed over sealed, so a
 * store that keeps sealed grants need not parse them again. A store with `addMany` takes them
 * all at once, all or nothing; one without gets `add` per ticket, and a failure part way (an
 * ID already taken) leaves the tickets before it issued.
 */
export async function issueFanoutTickets(
  store: Pick<GrantStore, "add" | "addMany">,
  options: FanoutTicketOptions,
): Promise<readonly Grant[]> {
  const { recipients } = options;
  if (!Array.isArray(recipients)) {
    throw new TesseraError("invalid_input", "fan-out recipients are an array");
  }
  if (new Set(recipients).size !== recipients.length) {
    throw new TesseraError("invalid_input", "fan-out recipients must be distinct");
  }
  const tickets = buildFanoutTickets({
    ...options,
    idPrefix: options.idPrefix ?? `ticket-${randomUUID()}-`,
    issuedAt: options.issuedAt ?? new Date(),
  });
  if (tickets.length === 0) return Object.freeze(tickets);
  if (store.addMany !== undefined) {
    const added = await store.addMany(tickets);
    return Object.isFrozen(added) ? added : Object.freeze([...added]);
  }
  const issued: Grant[] = [];
  for (const ticket of tickets) issued.push(await store.add(ticket));
  return Object.freeze(issued);
}
