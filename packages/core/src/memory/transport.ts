import { deliversSynchronously } from "../kernel/sync-ports.js";
import type { DeliveryResult, MessageEnvelope, MessageTransport } from "../ports/transport.js";

/** Answers one delivered message; its return value is the reply. */
export type ReplyHandler = (envelope: MessageEnvelope) => unknown | Promise<unknown>;

/**
 * Delivers inside the process, routing each envelope to the handler registered for its
 * recipient, or to the fallback. A recipient with neither is a failed delivery (`no_route`).
 * It records every envelope whose handler answered, so demos and tests count deliveries from what arrived.
 */
export class InProcessTransport implements MessageTransport {
  readonly #routes = new Map<string, ReplyHandler>();
  readonly #fallback: ReplyHandler | undefined;
  readonly #delivered: MessageEnvelope[] = [];

  constructor(options: { fallback?: ReplyHandler } = {}) {
    this.#fallback = options.fallback;
  }

  /** A router that answers every recipient with `reply from <recipient>`. */
  static echo(): InProcessTransport {
    return new InProcessTransport({
      fallback: (envelope) => `reply from ${envelope.recipient}`,
    });
  }

  route(recipient: string, handler: ReplyHandler): this {
    this.#routes.set(recipient, handler);
    return this;
  }

  get delivered(): readonly MessageEnvelope[] {
    return this.#delivered;
  }

  /**
   * Not `async`: a handler that answers at once is recorded at once and its result handed back
   * already settled. The kernel skips even that promise (see kernel/sync-ports.ts). A handler
   * that throws or rejects rejects the delivery.
   */
  deliver(envelope: MessageEnvelope): Promise<DeliveryResult> {
    try {
      return Promise.resolve(this.#deliverNow(envelope));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  static {
    deliversSynchronously(InProcessTransport.prototype.deliver, (transport, envelope) =>
      (transport as InProcessTransport).#deliverNow(envelope),
    );
  }

  /** The result now, or a promise of it when the handler answers with one; throws as it does. */
  #deliverNow(envelope: MessageEnvelope): DeliveryResult | Promise<DeliveryResult> {
    const handler = this.#routes.get(envelope.recipient) ?? this.#fallback;
    if (handler === undefined) return { status: "failed", code: "no_route" };
    const reply = handler(envelope);
    if (isThenable(reply)) {
      return Promise.resolve(reply).then((settled) => this.#arrived(envelope, settled));
    }
    return this.#arrived(envelope, reply);
  }

  #arrived(envelope: MessageEnvelope, reply: unknown): DeliveryResult {
    this.#delivered.push(envelope);
    return reply === undefined ? { status: "delivered" } : { status: "delivered", reply };
  }
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === "object" || typeof value === "function") &&
    value !== null &&
    typeof (value as { then?: unknown }).then === "function"
  );
}
