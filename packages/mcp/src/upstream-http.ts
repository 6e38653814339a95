import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { TransportSendOptions } from "@modelcontextprotocol/sdk/shared/transport.js";
import { isJSONRPCRequest, type JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { UpstreamFetch } from "./http-fetch.js";
import type { UpstreamTrace } from "./tracing.js";
import type { ClientCredentials } from "./upstream-auth.js";

/**
 * The SDK's Streamable HTTP client transport, with each call's own deadline reaching its HTTP
 * request. The SDK aborts requests only with one signal for the whole transport, so a call it
 * gave up on (a timeout) kept its request, and its socket, open upstream until the upstream
 * answered. Here `sendingWith(signal, request)` ties the JSON-RPC request that `request` sends to
 * `signal`, and the fetch of that request's POST (found by its id) listens to it.
 *
 * The SDK's `Protocol.request` calls `send` synchronously (no await before it), which is what
 * lets `send` take the signal from a field set around that call. The call's trace headers ride
 * the same way, as a header of that POST only.
 *
 * With `auth` (OAuth client credentials) every request carries the upstream's own access token,
 * never the caller's; a 401 gets one new token and one retry (the upstream refused the request
 * at its door: nothing ran).
 */
export class CallTransport extends StreamableHTTPClientTransport {
  readonly #watched: Map<string | number, Watched>;
  #outgoing: Watched | undefined;

  constructor(
    url: URL,
    upstream: UpstreamFetch,
    headers: Record<string, string> | undefined,
    auth?: ClientCredentials,
  ) {
    const watched = new Map<string | number, Watched>();
    super(url, {
      fetch: async (target, init) => {
        const call = watchedBy(watched, init);
        const extra: Record<string, string> = {};
        const traced = call?.trace;
        if (traced !== undefined) {
          extra.traceparent = traced.traceparent;
          if (traced.tracestate !== undefined) extra.tracestate = traced.tracestate;
        }
        if (auth === undefined) {
          return upstream.fetch(target, withHeaders(init, extra), call?.signal);
        }
        const token = await auth.token();
        const first = await upstream.fetch(
          target,
          withHeaders(init, { ...extra, authorization: `Bearer ${token}` }),
          call?.signal,
        );
        if (first.status !== 401) return first;
        const fresh = await auth.refused(token);
        if (fresh === undefined) return first;
        return upstream.fetch(
          target,
          withHeaders(init, { ...extra, authorization: `Bearer ${fresh}` }),
          call?.signal,
        );
      },
      requestInit: headers === undefined ? undefined : { headers },
    });
    this.#watched = watched;
  }

  /**
   * Runs `request`; the JSON-RPC request it sends is aborted with `signal`, and its POST carries
   * the trace's headers when given.
   */
  sendingWith<T>(
    signal: AbortSignal,
    request: () => Promise<T>,
    trace?: UpstreamTrace,
  ): Promise<T> {
    this.#outgoing = { signal, trace };
    try {
      return request();
    } finally {
      this.#outgoing = undefined;
    }
  }

  override async send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    const outgoing = this.#outgoing;
    if (outgoing === undefined || !isJSONRPCRequest(message)) return super.send(message, options);
    this.#outgoing = undefined;
    this.#watched.set(message.id, outgoing);
    try {
      return await super.send(message, options);
    } finally {
      this.#watched.delete(message.id);
    }
  }
}

/** One call's own: its deadline and its trace. */
interface Watched {
  readonly signal: AbortSignal;
  readonly trace: UpstreamTrace | undefined;
}

/** `init` with `extra` headers set over its own (the SDK's, and the configured static ones). */
function withHeaders(
  init: RequestInit | undefined,
  extra: Readonly<Record<string, string>>,
): RequestInit | undefined {
  const names = Object.keys(extra);
  if (names.length === 0) return init;
  const headers = new Headers(init?.headers);
  for (const name of names) headers.set(name, extra[name] as string);
  return { ...init, headers };
}

/** The call of a POST carrying a watched request, found by the request's id. */
function watchedBy(
  watched: ReadonlyMap<string | number, Watched>,
  init: RequestInit | undefined,
): Watched | undefined {
  if (watched.size === 0 || init?.method !== "POST" || typeof init.body !== "string") {
    return undefined;
  }
  const id = requestId(init.body);
  return id === undefined ? undefined : watched.get(id);
}

/**
 * The id of the JSON-RPC request in `body`. The SDK writes it last (`{...request, jsonrpc, id}`),
 * so it is read off the end without parsing the arguments; any other shape is parsed.
 */
function requestId(body: string): string | number | undefined {
  const at = body.lastIndexOf('"id":');
  if (at !== -1 && body.endsWith("}")) {
    const tail = body.slice(at + 5, -1);
    if (/^\d{1,15}$/.test(tail)) return Number(tail);
  }
  try {
    const id = (JSON.parse(body) as { id?: unknown }).id;
    return typeof id === "string" || typeof id === "number" ? id : undefined;
  } catch {
    return undefined;
  }
}
