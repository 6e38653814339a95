import { createHmac } from "node:crypto";
import { readBoundedText } from "@tessera/core/http";
import { withinJsonDepth } from "@tessera/core/store-kit";

const MAX_ANSWER_BYTES = 64 * 1024;

export type SignedPostResult =
  | { readonly status: "ok"; readonly body: unknown }
  | {
      readonly status: "failed";
      readonly code:
        | "timeout"
        | "unreachable"
        | "rejected"
        | "receiver_error"
        | "invalid_reply"
        | "unserializable";
      /** `false`: provably nothing was sent (see `DeliveryResult.sent`). */
      readonly sent?: false;
    };

/**
 * Connection errors that happen before a single byte of the request can be written: no
 * connection was ever made. Anything else (a reset, a socket closed mid-request, a timeout)
 * may come after the request reached the receiver.
 */
const NEVER_CONNECTED = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EADDRNOTAVAIL",
]);

function neverConnected(error: unknown): boolean {
  const cause = (error as { cause?: unknown } | null)?.cause as
    | { code?: unknown; errors?: unknown }
    | undefined;
  if (cause === undefined || cause === null) return false;
  // Several addresses tried (IPv6 then IPv4): every attempt must have been refused.
  if (Array.isArray(cause.errors) && cause.errors.length > 0) {
    return cause.errors.every((e) => NEVER_CONNECTED.has((e as { code?: string })?.code ?? ""));
  }
  return typeof cause.code === "string" && NEVER_CONNECTED.has(cause.code);
}

/** HMAC-SHA256 over `<timestamp>.<body>`, hex. */
export function sign(secret: string, timestamp: string, body: string): string {
  return createHmac("sha256", secret).update(`${timestamp}.${body}`).digest("hex");
}

/**
 * POSTs `payload` as JSON to `target.url`, signed in the `tessera-signature` header as
 * `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">` with the target's own secret.
 * Bounded by `timeoutMs` from connection to the last byte. A redirect is never followed (a
 * signed body must not be replayed to another host): a 3xx is the receiver's answer, so it is
 * `receiver_error` like a 5xx, not `unreachable` — the request did reach it. A 2xx answers its
 * JSON body (undefined if empty).
 */
export async function signedPost(
  target: { readonly url: string; readonly secret: string },
  payload: unknown,
  options: {
    readonly timeoutMs: number;
    readonly now?: number;
    readonly headers?: Record<string, string>;
  },
): Promise<SignedPostResult> {
  let body: string;
  try {
    body = JSON.stringify(payload);
  } catch {
    // A cycle, a BigInt, nesting past the stack: nothing can be POSTed, and nothing was.
    return { status: "failed", code: "unserializable", sent: false };
  }
  const timestamp = String(options.now ?? Math.floor(Date.now() / 1000));
  let response: Response;
  let text: string | undefined;
  try {
    response = await fetch(target.url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "tessera-signature": `t=${timestamp},v1=${sign(target.secret, timestamp, body)}`,
        ...options.headers,
      },
      body,
      // "manual" hands the 3xx back as it came; "error" threw, and read as unreachable.
      redirect: "manual",
      signal: AbortSignal.timeout(options.timeoutMs),
    });
    // Only a 2xx's body is read, and never past the bound: `response.text()` buffered whatever
    // came until the timeout (one receiver streaming 400 MB took the service from 94 MB to
    // 1.3 GB), and read an endless answer until it timed out.
    text =
      response.status >= 200 && response.status < 300
        ? await readBoundedText(response, MAX_ANSWER_BYTES)
        : await discard(response);
  } catch (error) {
    const name = (error as Error).name;
    const timedOut = name === "TimeoutError" || name === "AbortError";
    if (timedOut) return { status: "failed", code: "timeout" };
    return neverConnected(error)
      ? { status: "failed", code: "unreachable", sent: false }
      : { status: "failed", code: "unreachable" };
  }
  if (response.status >= 400 && response.status < 500)
    return { status: "failed", code: "rejected" };
  if (response.status < 200 || response.status >= 300) {
    return { status: "failed", code: "receiver_error" };
  }
  // Past the bound: the receiver answered (so it stays spent), but not with a usable reply.
  if (text === undefined) return { status: "failed", code: "invalid_reply" };
  if (text === "") return { status: "ok", body: undefined };
  let reply: unknown;
  try {
    reply = JSON.parse(text);
  } catch {
    return { status: "failed", code: "invalid_reply" };
  }
  // Nested past the bound a request's payload has, a reply overflowed the stack of whatever
  // wrote it next (the claim's answer, the caller's response): the send then answered 500
  // and its call ID stayed in doubt for good. Read as a reply that is not usable JSON.
  if (!withinJsonDepth(reply)) return { status: "failed", code: "invalid_reply" };
  return { status: "ok", body: reply };
}

/** Lets an answer's body go unread (a non-2xx's, or one past the bound): "" for the callers. */
async function discard(response: Response): Promise<string> {
  await response.body?.cancel().catch(() => undefined);
  return "";
}
