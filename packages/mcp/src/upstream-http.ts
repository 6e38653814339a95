import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { TransportSendOptions } from "@modelcontextprotocol/sdk/shared/transport.js";
import { isJSONRPCRequest, type JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { UpstreamFetch } from "./http-fetch.js";

/**
 * The SDK's Streamable HTTP client transport, with each call's own deadline reaching its HTTP
 * request. The SDK aborts requests only with one signal for the whole transport, so a call it
 * gave up on (a timeout) kept its request, and its socket, open upstream until the upstream
 * answered. Here `sendingWith(signal, request)` ties the JSON-RPC request that `request` sends to
 * `signal`, and the fetch of that request's POST (found by its id) listens to it.
 *
 * The SDK's `Protocol.request` calls `send` synchronously (no await before it), which is what
 * lets `send` take the signal from a field set around that call.
 */
export class CallTransport extends StreamableHTTPClientTransport {
  readonly #watched: Map<string | number, AbortSignal>;
  #outgoing: AbortSignal | undefined;

  constructor(url: URL, upstream: UpstreamFetch, headers: Record<string, string> | undefined) {
    const watched = new Map<string | number, AbortSignal>();
    super(url, {
      fetch: (target, init) => upstream.fetch(target, init, signalFor(watched, init)),
      requestInit: headers === undefined ? undefined : { headers },
    });
    this.#watched = watched;
  }

  /** Runs `request`; the JSON-RPC request it sends is aborted with `signal`. */
  sendingWith<T>(signal: AbortSignal, request: () => Promise<T>): Promise<T> {
    this.#outgoing = signal;
    try {
      return request();
    } finally {
      this.#outgoing = undefined;
    }
  }

  override async send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    const signal = this.#outgoing;
    if (signal === undefined || !isJSONRPCRequest(message)) return super.send(message, options);
    this.#outgoing = undefined;
    this.#watched.set(message.id, signal);
    try {
      return await super.send(message, options);
    } finally {
      this.#watched.delete(message.id);
    }
  }
}

/** The call signal of a POST carrying a watched request, found by the request's id. */
function signalFor(
  watched: ReadonlyMap<string | number, AbortSignal>,
  init: RequestInit | undefined,
): AbortSignal | undefined {
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
