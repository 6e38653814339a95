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
  | {
      readonly status: "failed";
      readonly code: string;
      /**
       * `false` when the transport knows nothing left this process (no connection was made,
       * the payload could not be serialized, no route): the kernel then gives the use the
       * send spent back (`GrantUsageStore.release`, audit `use_returned`). Absent or `true`:
       * it may have reached the recipient, and the use stays spent.
       */
      readonly sent?: boolean;
    };

export interface MessageTransport {
  deliver(envelope: MessageEnvelope): Promise<DeliveryResult>;
}
