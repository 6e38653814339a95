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
  readonly fetch: (url: string | URL, init?: RequestInit) => Promise<Response>;
  /** Ends the kept-alive connections. */
  close(): void;
}

/** An upstream answer larger than this is refused, not buffered. */
const MAX_BODY_BYTES = 64 * 1024 * 1024;

export function upstreamFetch(): UpstreamFetch {
  const http = new HttpAgent({ keepAlive: true });
  const https = new HttpsAgent({ keepAlive: true });
  const fetch = (url: string | URL, init: RequestInit = {}): Promise<Response> => {
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
    return new Promise<Response>((resolve, reject) => {
      const req = (secure ? httpsRequest : httpRequest)(target, {
        method: init.method ?? "GET",
        headers,
        agent: secure ? https : http,
      });
      const onAbort = (): void => {
        req.destroy(abortError(signal as AbortSignal));
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      const done = (): void => signal?.removeEventListener("abort", onAbort);
      req.once("error", (error) => {
        done();
        reject(
          signal?.aborted ? abortError(signal) : new TypeError("fetch failed", { cause: error }),
        );
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
            reject(signal?.aborted ? abortError(signal) : error);
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

async function readAll(res: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) {
      res.destroy();
      throw new TypeError(`the upstream answer is over ${MAX_BODY_BYTES} bytes`);
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
