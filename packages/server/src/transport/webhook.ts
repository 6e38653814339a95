import { timingSafeEqual } from "node:crypto";
import type { DeliveryResult, MessageEnvelope, MessageTransport } from "@tessera/core";
import { deliverySpan, endClientSpan, traceHeaders } from "../tracing.js";
import { sign, signedPost } from "./signed-post.js";

export interface WebhookRecipient {
  /** Where the envelope is POSTed. */
  readonly url: string;
  /** The recipient's own HMAC key: a leaked secret forges messages to one recipient only. */
  readonly secret: string;
}

export interface WebhookTransportOptions {
  /** Recipient name → its endpoint. A recipient not listed fails with `no_route`. */
  readonly recipients: Readonly<Record<string, WebhookRecipient>>;
  /** Per delivery, connection to last byte of the answer (default 5000 ms). */
  readonly timeoutMs?: number;
}

/**
 * Delivers each authorized envelope as a signed POST to its recipient's URL. The
 * `tessera-signature` header is `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`: the
 * receiver checks it with `verifyWebhookSignature` and refuses stale timestamps, so a captured
 * request cannot be replayed later. A 2xx is `delivered`, its JSON body (if any) the reply.
 * Every failure is `{ status: "failed", code }`: `no_route`, `timeout`, `unreachable`,
 * `rejected` (4xx), `receiver_error` (5xx, 3xx), `invalid_reply` (not JSON, over 64 KiB, nested past 64 levels),
 * `unserializable` (the payload is not JSON-serializable). Those that provably sent nothing
 * say `sent: false` — `no_route`, `unserializable`, and `unreachable` when no connection was
 * ever made (refused, no such host) — so the kernel gives the ticket's use back; the others
 * may have reached the receiver and keep it spent.
 *
 * Each POST carries a W3C `traceparent` with the envelope's trace ID (the decision's, so the
 * receiver's spans join the caller's trace and the audit event), its parent the delivery's
 * `tessera.webhook` span when the host traces, else a fresh span ID.
 */
export function webhookTransport(options: WebhookTransportOptions): MessageTransport {
  const recipients = new Map(Object.entries(options.recipients));
  return {
    async deliver(envelope: MessageEnvelope): Promise<DeliveryResult> {
      const recipient = recipients.get(envelope.recipient);
      if (recipient === undefined) return { status: "failed", code: "no_route", sent: false };
      const { messageId, sender, recipient: to, payload, traceId, callId, grantId } = envelope;
      // The decision's trace continues at the receiver: `traceparent` names this delivery.
      const { span, traceparent, tracestate } = deliverySpan("tessera.webhook", envelope);
      const answer = await signedPost(
        recipient,
        { messageId, sender, recipient: to, payload, traceId, callId, grantId },
        {
          timeoutMs: options.timeoutMs ?? 5000,
          headers:
            traceparent === undefined
              ? { "tessera-message-id": messageId }
              : { "tessera-message-id": messageId, ...traceHeaders(traceparent, tracestate) },
        },
      );
      const result: DeliveryResult =
        answer.status === "failed"
          ? answer
          : answer.body === undefined
            ? { status: "delivered" }
            : { status: "delivered", reply: answer.body };
      endClientSpan(span, result);
      return result;
    },
  };
}

/**
 * For the receiver: does `header` (the `tessera-signature` value) sign this exact raw `body`
 * with `secret`, at a timestamp within `toleranceSeconds` (default 300) of now? Constant time.
 */
export function verifyWebhookSignature(input: {
  readonly secret: string;
  readonly body: string;
  readonly header: string | undefined;
  readonly toleranceSeconds?: number;
  readonly now?: number;
}): boolean {
  const match = /^t=(\d{1,12}),v1=([0-9a-f]{64})$/.exec(input.header ?? "");
  if (match === null) return false;
  const [, timestamp = "", signature = ""] = match;
  const now = input.now ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - Number(timestamp)) > (input.toleranceSeconds ?? 300)) return false;
  const expected = Buffer.from(sign(input.secret, timestamp, input.body), "hex");
  return timingSafeEqual(expected, Buffer.from(signature, "hex"));
}
