import {
  isJSONRPCErrorResponse,
  isJSONRPCNotification,
  isJSONRPCRequest,
  isJSONRPCResultResponse,
  type JSONRPCMessage,
  type RequestId,
} from "@modelcontextprotocol/sdk/types.js";
import type { McpTransport } from "./types.js";

/** The error a request gets while the gateway stops: nothing of it runs, so it may be sent again. */
export const GATEWAY_STOPPING = {
  code: -32000,
  message: "the gateway is stopping: send the request again later",
} as const;

/**
 * One served connection, with its requests still to be answered counted on the wire: a request
 * taken from the client until its answer is written. Closing the inner transport at once (as
 * the SDK's server does on close) cut the calls under way: their tools may have run and their
 * answers were never written, leaving the calls in doubt. `stop` lets them answer first.
 *
 * Counted here rather than in the gateway's handlers: the SDK writes a handler's answer a few
 * ticks after the handler returns, and an answer is only out once the transport has taken it.
 */
export class DrainingTransport implements McpTransport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage, extra?: unknown) => void;

  readonly #inner: McpTransport;
  /** Ids taken and not yet answered, with how many of each: a client may reuse a live id. */
  readonly #pending = new Map<RequestId, number>();
  #stopping = false;
  #idle: (() => void) | undefined;

  constructor(inner: McpTransport) {
    this.#inner = inner;
  }

  get sessionId(): string | undefined {
    return this.#inner.sessionId;
  }

  start(): Promise<void> {
    this.#inner.onmessage = (message, extra) => this.#receive(message, extra);
    this.#inner.onerror = (error) => this.onerror?.(error);
    this.#inner.onclose = () => {
      // Nothing more can be answered on a closed connection: no reason to wait for it.
      this.#pending.clear();
      this.#idle?.();
      this.onclose?.();
    };
    return this.#inner.start();
  }

  async send(message: JSONRPCMessage, options?: unknown): Promise<void> {
    try {
      await this.#inner.send(message, options);
    } finally {
      const answered =
        isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)
          ? message.id
          : undefined;
      if (answered !== undefined) this.#answered(answered);
    }
  }

  close(): Promise<void> {
    return this.#inner.close();
  }

  /**
   * Takes no more requests (each is answered `GATEWAY_STOPPING`), waits until those taken are
   * answered or `drainMs` has passed, then closes the connection.
   */
  async stop(drainMs: number): Promise<void> {
    this.#stopping = true;
    if (this.#pending.size > 0) {
      await new Promise<void>((resolve) => {
        const cut = setTimeout(resolve, drainMs);
        this.#idle = () => {
          clearTimeout(cut);
          resolve();
        };
      });
    }
    await this.#inner.close();
  }

  #receive(message: JSONRPCMessage, extra: unknown): void {
    if (isJSONRPCRequest(message)) {
      if (this.#stopping) {
        const answer = { jsonrpc: "2.0" as const, id: message.id, error: GATEWAY_STOPPING };
        void this.#inner.send(answer).catch((error: unknown) => this.onerror?.(error as Error));
        return;
      }
      this.#pending.set(message.id, (this.#pending.get(message.id) ?? 0) + 1);
    } else if (isJSONRPCNotification(message) && message.method === "notifications/cancelled") {
      // The SDK writes no answer to a cancelled request: waiting for one would last the drain.
      const id = (message.params as { requestId?: RequestId } | undefined)?.requestId;
      if (id !== undefined && this.#pending.delete(id)) this.#settle();
    }
    // Notifications and the client's answers still go through while stopping: a call under way
    // may be waiting for one.
    this.onmessage?.(message, extra);
  }

  #answered(id: RequestId): void {
    const count = this.#pending.get(id);
    if (count === undefined) return;
    if (count > 1) this.#pending.set(id, count - 1);
    else this.#pending.delete(id);
    this.#settle();
  }

  #settle(): void {
    if (this.#stopping && this.#pending.size === 0) this.#idle?.();
  }
}
