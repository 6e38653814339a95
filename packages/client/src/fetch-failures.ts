/** What the client makes of fetch's failures, and the waits between its attempts. */

/**
 * fetch reports every network failure as a TypeError with the failure as its `cause`
 * ("fetch failed"). A TypeError without one was raised before anything was sent: a header
 * value or URL fetch will not take (a body JSON cannot write is refused before fetch, in
 * `request.ts`). The same request would fail the same way, so it is the caller's to fix,
 * never retried.
 */
export function isRefusedBeforeSending(error: unknown): boolean {
  return error instanceof TypeError && error.cause === undefined;
}

/**
 * fetch's own message is "fetch failed" whatever happened; the cause says what did (refused,
 * a name that does not resolve, a port fetch will not use, a TLS failure), so that is what
 * an operator reads, with the URL it happened to.
 */
export function describeNetworkError(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } } | undefined)?.cause;
  if (cause?.code === "ECONNREFUSED") return "connection refused (ECONNREFUSED)";
  if (cause?.code === "ECONNRESET" || cause?.code === "UND_ERR_SOCKET")
    return `connection reset (${cause.code})`;
  if (cause?.code === "ENOTFOUND" || cause?.code === "EAI_AGAIN")
    return `host name does not resolve (${cause.code})`;
  const message = cause?.message ?? (error instanceof Error ? error.message : "network error");
  return cause?.code === undefined || message.includes(cause.code)
    ? message
    : `${message} (${cause.code})`;
}

/** The URL as an error may show it: credentials in it never reach a message or a log. */
export function redactedUrl(raw: string | URL): string {
  const url = new URL(raw);
  url.username = "";
  url.password = "";
  url.search = "";
  return url.href;
}

/**
 * A 3xx, or fetch's opaque stand-in for one (status 0). The client asks fetch never to follow
 * (`redirect: "manual"`) and takes a redirect as an answer it did not expect; a fetch passed in
 * that ignores the option still gets its 3xx refused here.
 */
export function isRedirect(response: Response): boolean {
  return response.type === "opaqueredirect" || (response.status >= 300 && response.status < 400);
}

/** What the operator reads: where it pointed (no credentials, no query), and what to fix. */
export function describeRedirect(response: Response, requestUrl: string): string {
  let target: string | undefined;
  try {
    const location = response.headers.get("location");
    target = location === null ? undefined : redactedUrl(new URL(location, requestUrl));
  } catch {
    target = undefined;
  }
  return `answered ${response.status}, a redirect${target === undefined ? "" : ` to ${target}`}, which the client never follows (the token and body would go wherever it points): give \`url\` the service's own address`;
}

/** `AbortSignal.any` where Node has it (20.3+), the same by hand before. */
export function eitherSignal(a: AbortSignal, b: AbortSignal): AbortSignal {
  if (typeof AbortSignal.any === "function") return AbortSignal.any([a, b]);
  const controller = new AbortController();
  for (const signal of [a, b]) {
    if (signal.aborted) controller.abort(signal.reason);
    else signal.addEventListener("abort", () => controller.abort(signal.reason), { once: true });
  }
  return controller.signal;
}

export function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
