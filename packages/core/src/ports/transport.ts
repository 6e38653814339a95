/** What the kernel hands to a transport once a send is authorized. */
export interface MessageEnvelope {
  readonly messageId: string;
  readonly sender: string;
  readonly recipient: string;
  /** Data only: nothing in it is ever read as authority. */
  readonly payload: unknown;
  readonly traceId: string;
  readonly callId: string;
  readonly grantId: string;
}

export type DeliveryResult =
  | { readonly status: "delivered"; readonly reply?: unknown }
  | { readonly status: "failed"; readonly code: string };

export interface MessageTransport {
  deliver(envelope: MessageEnvelope): Promise<DeliveryResult>;
}
