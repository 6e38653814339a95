import { TesseraError } from "../contracts/errors.js";
import { messageSendCapability } from "../contracts/messages.js";
import type { Grant, GrantInput } from "../contracts/schemas.js";
import { grantSchemaError, parseGrantInput } from "../contracts/store-input.js";
import { isSegment } from "../kernel/request.js";
import { sealValidatedGrant } from "../kernel/validated-grants.js";

/** What a fan-out ticket is built from: one set of options, one recipient per ticket. */
export interface TicketShape {
  readonly namespaceId: string;
  readonly issuer: string;
  readonly subject: string;
  readonly owner: string;
  readonly recipients: readonly string[];
  readonly idPrefix: string;
  readonly expiresAt?: Date;
  readonly purposes?: readonly string[];
  readonly issuedAt: Date;
}

/**
 * The fan-out tickets, validated once per shape and sealed, or `invalid_grant` when any one of
 * them would fail GrantSchema (then none is built: nothing reaches a store half done).
 *
 * Every ticket is the same grant but for two fields: its ID (`<prefix><index>`) and the one
 * path segment naming its recipient. So one ticket is parsed whole by GrantSchema — the one
 * with the longest ID, since the IDs differ only in their index digits — which checks every
 * shared field and every cross-field rule exactly as a per-ticket parse would; then each
 * recipient is checked by the segment rule GrantSchema itself uses (length 1–512 and
 * `isSafeSegment`, as the kernel checks a request's segments: a zod parse per recipient cost
 * more than building the ticket). Nothing else varies, so nothing else can fail: a property
 * test holds this equal to parsing every ticket.
 */
export function buildFanoutTickets(shape: TicketShape): Grant[] {
  const { recipients, idPrefix } = shape;
  // The grant schema lets a capability name no owner (it then covers every owner's recipient
  // of that name): a ticket must name whose recipients it reaches. From plain JavaScript a
  // misspelt `owner` came through as undefined and issued owner-less tickets.
  if (shape.owner === undefined) {
    throw new TesseraError("invalid_grant", "fan-out tickets name their owner");
  }
  // The issue instant is read first, the rest only when there is a ticket to check it in:
  // the order the per-ticket path refused in, which the property test holds this to.
  const issuedAt = isoInstant(shape.issuedAt, "issuedAt");
  const tickets: Grant[] = [];
  if (recipients.length === 0) return tickets;
  const expiresAt =
    shape.expiresAt === undefined ? undefined : isoInstant(shape.expiresAt, "expiresAt");
  const template = parseGrantInput(
    ticketInput(
      shape,
      issuedAt,
      expiresAt,
      recipients[0] as string,
      `${idPrefix}${recipients.length - 1}`,
    ),
  );
  const capability = template.capabilities[0] as Grant["capabilities"][number];
  const { namespaceId, issuer, subject, constraints } = template;
  const { namespace, owner } = capability.resource;
  const { actions, scope } = capability;
  // Shared by every ticket: frozen, so no ticket can change another's.
  if (constraints.purposes) Object.freeze(constraints.purposes);
  Object.freeze(constraints);
  Object.freeze(actions);
  // Every recipient before any ticket: nothing is built for a batch that is refused, and the
  // parser's short-lived garbage is collected while few tickets are alive to be copied.
  for (let index = 0; index < recipients.length; index++) {
    const recipient = recipients[index] as string;
    if (!isSegment(recipient)) {
      // Refused: that ticket parsed whole names the field, as adding it would have.
      const id = `${idPrefix}${index}`;
      parseGrantInput(ticketInput(shape, issuedAt, expiresAt, recipient, id));
      throw grantSchemaError([
        {
          code: "custom",
          path: ["capabilities", 0, "resource", "path", 0],
          message: "unsafe path segment",
        },
      ]);
    }
  }
  for (let index = 0; index < recipients.length; index++) {
    const recipient = recipients[index] as string;
    // Keys in GrantSchema's output order, so a ticket serialises as a parsed one would.
    tickets.push(
      sealValidatedGrant({
        id: `${idPrefix}${index}`,
        namespaceId,
        issuer,
        subject,
        capabilities: [{ resource: { namespace, path: [recipient], owner }, actions, scope }],
        constraints,
        issuedAt: template.issuedAt,
      }),
    );
  }
  return tickets;
}

/** Ticket `id`'s grant input, as a host would hand it to `GrantStore.add`. */
function ticketInput(
  shape: TicketShape,
  issuedAt: string,
  expiresAt: string | undefined,
  recipient: string,
  id: string,
): GrantInput {
  return {
    id,
    namespaceId: shape.namespaceId,
    issuer: shape.issuer,
    subject: shape.subject,
    capabilities: [messageSendCapability(recipient, shape.owner)],
    constraints: {
      maxUses: 1,
      ...(expiresAt === undefined ? {} : { expiresAt }),
      ...(shape.purposes ? { purposes: [...shape.purposes] } : {}),
    },
    issuedAt,
  };
}

/** A Date as the ISO instant a grant stores; a Date that names no time is no grant's instant. */
function isoInstant(date: Date, what: string): string {
  if (!(date instanceof Date) || Number.isNaN(date.getTime())) {
    throw new TesseraError("invalid_grant", `${what} is a valid Date`);
  }
  return date.toISOString();
}
