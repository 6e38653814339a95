import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { Readable } from "node:stream";

/**
 * The `fetch` the gateway's upstream clients use: node:http over keep-alive agents, answering a
 * minimal `Response`. Profiled, undici's `fetch` (its web streams, abort-signal listeners and
 * response cloning) was the largest single cost of a forwarded call, larger than the gateway's
 * own decision; the SDK's Streamable HTTP client takes any fetch, so all its protocol handling
 * (sessions, SSE, redirects within the origin) stays the SDK's.
 *
 * A JSON answer is read whole (bounded) and handed over as a buffer; only an event stream is
 * passed on as a web stream, as the SDK's SSE reader needs one. Redirects are never followed
 * here: the SDK asks for `redirect: "manual"` and follows within the origin itself.
 */
export interface UpstreamFetch {
  /**
   * `call`, when given, is one call's own deadline: the SDK's `init.signal` belongs to the whole
   * transport, so a call that timed out would otherwise leave its request (and its socket) open.
   */
  readonly fetch: (url: string | URL, init?: RequestInit, call?: AbortSignal) => Promise<Response>;
  /** Ends the kept-alive connections. */
  close(): void;
}

/**
 * The request never reached the upstream: no connection was made (refused, unresolvable,
 * unreachable, the TLS handshake failed), so not one byte of it was written. Nothing ran.
 */
export class UpstreamUnreached extends TypeError {
  constructor(cause: unknown) {
    super("fetch failed: the upstream was not reached", { cause });
    this.name = "UpstreamUnreached";
  }
}

/**
 * The connection was lost once the request could have been written, before the whole answer
 * arrived: the upstream may have run the call, so it is in doubt.
 */
export class UpstreamLost extends TypeError {
  constructor(cause: unknown) {
    super("fetch failed: the connection was lost before the answer", { cause });
    this.name = "UpstreamLost";
  }
}

/** An upstream answer larger than this is refused, not buffered. */
const MAX_BODY_BYTES = 64 * 1024 * 1024;

export function upstreamFetch(): UpstreamFetch {
  const http = new HttpAgent({ keepAlive: true });
  const https = new HttpsAgent({ keepAlive: true });
  const fetch = (
    url: string | URL,
    init: RequestInit = {},
    call?: AbortSignal,
  ): Promise<Response> => {
    const target = typeof url === "string" ? new URL(url) : url;
    const secure = target.protocol === "https:";
    if (!secure && target.protocol !== "http:") {
      return Promise.reject(new TypeError(`unsupported protocol ${target.protocol}`));
    }
    const headers: Record<string, string> = {};
    new Headers(init.headers).forEach((value, name) => {
      headers[name] = value;
    });
    const body = typeof init.body === "string" ? Buffer.from(init.body) : undefined;
    if (init.body != null && body === undefined) {
      return Promise.reject(new TypeError("only string bodies are sent upstream"));
    }
    if (body !== undefined) headers["content-length"] = String(body.length);
    const signal = init.signal ?? undefined;
    if (signal?.aborted) return Promise.reject(abortError(signal));
    if (call?.aborted) return Promise.reject(abortError(call));
    return new Promise<Response>((resolve, reject) => {
      const req = (secure ? httpsRequest : httpRequest)(target, {
        method: init.method ?? "GET",
        headers,
        agent: secure ? https : http,
      });
      // Destroying the request closes its socket: an abandoned call holds nothing upstream.
      const onAbort = (): void => {
        req.destroy(abortError(signal as AbortSignal));
      };
      const onCallAbort = (): void => {
        req.destroy(abortError(call as AbortSignal));
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      call?.addEventListener("abort", onCallAbort, { once: true });
      const done = (): void => {
        signal?.removeEventListener("abort", onAbort);
        call?.removeEventListener("abort", onCallAbort);
      };
      const aborted = (): Error | undefined =>
        signal?.aborted ? abortError(signal) : call?.aborted ? abortError(call) : undefined;
      // Until a connection is made not one byte of the request can have left.
      let connected = false;
      req.once("socket", (socket) => {
        if (!socket.connecting) connected = true;
        else socket.once(secure ? "secureConnect" : "connect", () => (connected = true));
      });
      req.once("error", (error) => {
        done();
        reject(aborted() ?? (connected ? new UpstreamLost(error) : new UpstreamUnreached(error)));
      });
      req.once("response", (res) => {
        const type = res.headers["content-type"] ?? "";
        if (/^\s*text\/event-stream/i.test(type)) {
          // A stream lives on: its abort ends it, and the listener goes when it does.
          res.once("close", done);
          resolve(leanResponse(target, res, undefined));
          return;
        }
        readAll(res).then(
          (buffer) => {
            done();
            resolve(leanResponse(target, res, buffer));
          },
          (error: unknown) => {
            done();
            // An answer cut off mid-body: the upstream ran the call; what it said is lost.
            reject(aborted() ?? (error instanceof TooLarge ? error : new UpstreamLost(error)));
          },
        );
      });
      req.end(body);
    });
  };
  return {
    fetch,
    close: () => {
      http.destroy();
      https.destroy();
    },
  };
}

function abortError(signal: AbortSignal): Error {
  return signal.reason instanceof Error
    ? signal.reason
    : new DOMException("This operation was aborted", "AbortError");
}

/** The upstream answered, too much to read: a failure of the answer, not of the connection. */
class TooLarge extends TypeError {}

async function readAll(res: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) {
      res.destroy();
      throw new TooLarge(`the upstream answer is over ${MAX_BODY_BYTES} bytes`);
    }
    chunks.push(chunk as Buffer);
  }
  return chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
}

/**
 * What the SDK reads of a response: status, headers, and the body as text, JSON or (for an
 * event stream) a web stream. A buffered body becomes a stream only if asked for (to cancel it).
 */
function leanResponse(url: URL, res: IncomingMessage, buffer: Buffer | undefined): Response {
  const headers = new Headers();
  const raw = res.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2)
    headers.append(raw[i] as string, raw[i + 1] as string);
  const status = res.statusCode ?? 0;
  let stream: ReadableStream<Uint8Array> | undefined;
  const body = (): ReadableStream<Uint8Array> => {
    stream ??=
      buffer === undefined
        ? (Readable.toWeb(res) as ReadableStream<Uint8Array>)
        : new ReadableStream({
            start(controller) {
              controller.enqueue(new Uint8Array(buffer));
              controller.close();
            },
          });
    return stream;
  };
  const text = async (): Promise<string> => {
    if (buffer !== undefined) return buffer.toString("utf8");
    return new Response(body()).text();
  };
  const response = {
    status,
    statusText: res.statusMessage ?? "",
    ok: status >= 200 && status < 300,
    headers,
    url: url.href,
    redirected: false,
    type: "basic",
    get body() {
      return body();
    },
    get bodyUsed() {
      return stream !== undefined;
    },
    text,
    json: async () => JSON.parse(await text()) as unknown,
  };
  return response as unknown as Response;
}
