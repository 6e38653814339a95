import { createHmac, timingSafeEqual } from "node:crypto";
import type { DeliveryResult, MessageEnvelope, MessageTransport } from "@tessera/core";

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
  /** Seconds since the epoch; for tests. */
  readonly now?: () => number;
}

const MAX_REPLY_BYTES = 64 * 1024;

/**
 * Delivers each authorized envelope as a signed POST to its recipient's URL. The signature
 * header is `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`: the receiver checks it with
 * `verifyWebhookSignature` and refuses stale timestamps, so a captured request cannot be
 * replayed later. A 2xx is `delivered`, its JSON body (if any) the reply; every failure is
 * `{ status: "failed", code }`: `no_route`, `timeout`, `unreachable`, `rejected` (4xx),
 * `receiver_error` (5xx or other), `invalid_reply` (not JSON, or too large).
 */
export function webhookTransport(options: WebhookTransportOptions): MessageTransport {
  const timeoutMs = options.timeoutMs ?? 5000;
  const now = options.now ?? (() => Math.floor(Date.now() / 1000));
  const recipients = new Map(Object.entries(options.recipients));
  return {
    async deliver(envelope: MessageEnvelope): Promise<DeliveryResult> {
      const recipient = recipients.get(envelope.recipient);
      if (recipient === undefined) return { status: "failed", code: "no_route" };
      const body = JSON.stringify({
        messageId: envelope.messageId,
        sender: envelope.sender,
        recipient: envelope.recipient,
        payload: envelope.payload,
        traceId: envelope.traceId,
        callId: envelope.callId,
        grantId: envelope.grantId,
      });
      const timestamp = String(now());
      let response: Response;
      let text: string;
      try {
        response = await fetch(recipient.url, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            "tessera-signature": `t=${timestamp},v1=${sign(recipient.secret, timestamp, body)}`,
            "tessera-message-id": envelope.messageId,
          },
          body,
          redirect: "error",
          signal: AbortSignal.timeout(timeoutMs),
        });
        text = await response.text();
      } catch (error) {
        const name = (error as Error).name;
        return {
          status: "failed",
          code: name === "TimeoutError" || name === "AbortError" ? "timeout" : "unreachable",
        };
      }
      if (response.status >= 400 && response.status < 500)
        return { status: "failed", code: "rejected" };
      if (response.status < 200 || response.status >= 300) {
        return { status: "failed", code: "receiver_error" };
      }
      if (text === "") return { status: "delivered" };
      if (Buffer.byteLength(text) > MAX_REPLY_BYTES)
        return { status: "failed", code: "invalid_reply" };
      try {
        return { status: "delivered", reply: JSON.parse(text) };
      } catch {
        return { status: "failed", code: "invalid_reply" };
      }
    },
  };
}

function sign(secret: string, timestamp: string, body: string): string {
  return createHmac("sha256", secret).update(`${timestamp}.${body}`).digest("hex");
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
