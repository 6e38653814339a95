import { randomUUID } from "node:crypto";
import { TesseraError } from "../contracts/errors.js";
import { messageSendCapability } from "../contracts/messages.js";
import type { Grant } from "../contracts/schemas.js";
import type { GrantStore } from "../ports/grant-source.js";

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
 */
export async function issueFanoutTickets(
  store: Pick<GrantStore, "add">,
  options: FanoutTicketOptions,
): Promise<readonly Grant[]> {
  if (new Set(options.recipients).size !== options.recipients.length) {
    throw new TesseraError("invalid_input", "fan-out recipients must be distinct");
  }
  const prefix = options.idPrefix ?? `ticket-${randomUUID()}-`;
  const issuedAt = (options.issuedAt ?? new Date()).toISOString();
  const tickets: Grant[] = [];
  for (const [index, recipient] of options.recipients.entries()) {
    tickets.push(
      await store.add({
        id: `${prefix}${index}`,
        namespaceId: options.namespaceId,
        issuer: options.issuer,
        subject: options.subject,
        capabilities: [messageSendCapability(recipient, options.owner)],
        constraints: {
          maxUses: 1,
          ...(options.expiresAt ? { expiresAt: options.expiresAt.toISOString() } : {}),
          ...(options.purposes ? { purposes: [...options.purposes] } : {}),
        },
        issuedAt,
      }),
    );
  }
  return Object.freeze(tickets);
}
