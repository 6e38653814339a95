import type { Capability } from "./schemas.js";

/**
 * The `messages.send` tool as data: its action, its resource namespace, and the one shape of
 * capability a recipient-scoped ticket carries. Contracts, so the kernel and the messaging
 * helpers both read them without depending on each other.
 */

/** A resource as a decision names it: `namespace:/seg/seg`, optionally owned. */
export interface ResourceRef {
  readonly namespace: string;
  readonly path: readonly string[];
  /** Whose resource it is. A turn acts for its own owner: any other owner is refused. */
  readonly owner?: string;
}

/** The action of the `messages.send` tool. */
export const MESSAGE_SEND_ACTION = "messages.send";

/** Resource namespace of message recipients: `messages:/<recipient>`. */
export const MESSAGE_NAMESPACE = "messages";

/**
 * Authority to send to exactly one recipient on behalf of `owner`: one whole path segment,
 * exact scope, so it never covers another recipient whose name merely starts the same way.
 */
export function messageSendCapability(recipient: string, owner: string): Capability {
  return {
    resource: { namespace: MESSAGE_NAMESPACE, path: [recipient], owner },
    actions: [MESSAGE_SEND_ACTION],
    scope: "exact",
  };
}

/** The resource a send to `recipient` asks for; the owner is the turn's, never the message's. */
export function messageResource(recipient: string, owner: string | undefined): ResourceRef {
  return owner === undefined
    ? { namespace: MESSAGE_NAMESPACE, path: [recipient] }
    : { namespace: MESSAGE_NAMESPACE, path: [recipient], owner };
}
