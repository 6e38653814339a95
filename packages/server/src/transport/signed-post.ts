import { createHmac } from "node:crypto";

const MAX_ANSWER_BYTES = 64 * 1024;

export type SignedPostResult =
  | { readonly status: "ok"; readonly body: unknown }
  | {
      readonly status: "failed";
      readonly code: "timeout" | "unreachable" | "rejected" | "receiver_error" | "invalid_reply";
    };

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
  const body = JSON.stringify(payload);
  const timestamp = String(options.now ?? Math.floor(Date.now() / 1000));
  let response: Response;
  let text: string;
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
    text = await response.text();
  } catch (error) {
    const name = (error as Error).name;
    const timedOut = name === "TimeoutError" || name === "AbortError";
    return { status: "failed", code: timedOut ? "timeout" : "unreachable" };
  }
  if (response.status >= 400 && response.status < 500)
    return { status: "failed", code: "rejected" };
  if (response.status < 200 || response.status >= 300) {
    return { status: "failed", code: "receiver_error" };
  }
  if (text === "") return { status: "ok", body: undefined };
  if (Buffer.byteLength(text) > MAX_ANSWER_BYTES)
    return { status: "failed", code: "invalid_reply" };
  try {
    return { status: "ok", body: JSON.parse(text) };
  } catch {
    return { status: "failed", code: "invalid_reply" };
  }
}
