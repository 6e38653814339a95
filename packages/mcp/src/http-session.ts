import type { IncomingMessage, ServerResponse } from "node:http";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  isInitializeRequest,
  isJSONRPCRequest,
  type JSONRPCMessage,
  JSONRPCMessageSchema,
  type RequestId,
  SUPPORTED_PROTOCOL_VERSIONS,
} from "@modelcontextprotocol/sdk/types.js";

/** As the SDK's server transport: more messages in one POST are refused. */
const MAX_BATCH = 100;

/**
 * The gateway's client-facing Streamable HTTP, one instance per MCP session (or per request
 * when stateless), in JSON-response mode only: the SDK's own server transport converts every
 * node request into a web `Request` and every answer back from a web `Response`, which
 * profiling showed costing more than the gateway's whole decision. The SDK `Server` above it
 * is unchanged (request validation, handlers, capabilities); this answers what the SDK's
 * transport answers for the same input (406, 415, 400 -32700, 400 not initialized, 404, 409,
 * 202 for notifications), and holds a GET event stream for server notifications
 * (`notifications/tools/list_changed`).
 */
export class JsonSessionTransport implements Transport {
  sessionId?: string;
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: Transport["onmessage"];
  readonly #newId: (() => string) | undefined;
  readonly #initialized: (id: string) => void;
  /** Requests awaiting their response, by JSON-RPC id (a queue: ids may repeat in flight). */
  readonly #waiting = new Map<RequestId, ((message: JSONRPCMessage) => void)[]>();
  #stream: ServerResponse | undefined;
  #ready = false;
  #closed = false;

  /** `newId` undefined: stateless, no session and no initialization required. */
  constructor(newId: (() => string) | undefined, initialized: (id: string) => void = () => {}) {
    this.#newId = newId;
    this.#initialized = initialized;
  }

  async start(): Promise<void> {}

  async send(message: JSONRPCMessage): Promise<void> {
    if ("id" in message && !("method" in message) && message.id !== undefined) {
      const queue = this.#waiting.get(message.id);
      const resolve = queue?.shift();
      if (queue?.length === 0) this.#waiting.delete(message.id);
      resolve?.(message);
      return;
    }
    // A notification or a server request: only the session's event stream can carry it (in
    // JSON mode a POST's answer holds responses only, as with the SDK's transport).
    const stream = this.#stream;
    if (stream !== undefined && !stream.writableEnded) {
      stream.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`);
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#stream?.end();
    this.#stream = undefined;
    this.#waiting.clear();
    this.onclose?.();
  }

  /** One HTTP request of this session; `body` is the parsed JSON of a POST. */
  async handle(req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> {
    if (req.method === "POST") return this.#post(req, res, body);
    if (req.method === "GET") return this.#get(req, res);
    if (req.method === "DELETE" && this.#newId !== undefined) {
      await this.close();
      res.writeHead(200).end();
      return;
    }
    res.setHeader("allow", this.#newId === undefined ? "POST" : "GET, POST, DELETE");
    return fail(res, 405, -32000, "Method not allowed.");
  }

  async #post(req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> {
    const accept = req.headers.accept ?? "";
    if (!accept.includes("application/json") || !accept.includes("text/event-stream")) {
      return fail(
        res,
        406,
        -32000,
        "Not Acceptable: Client must accept both application/json and text/event-stream",
      );
    }
    if (!isJson(req.headers["content-type"])) {
      return fail(
        res,
        415,
        -32000,
        "Unsupported Media Type: Content-Type must be application/json",
      );
    }
    if (Array.isArray(body) && body.length > MAX_BATCH) {
      return fail(res, 400, -32600, `Invalid Request: Batch must not exceed ${MAX_BATCH} messages`);
    }
    const messages: JSONRPCMessage[] = [];
    for (const raw of Array.isArray(body) ? body : [body]) {
      const parsed = JSONRPCMessageSchema.safeParse(raw);
      if (!parsed.success) return fail(res, 400, -32700, "Parse error: Invalid JSON-RPC message");
      messages.push(parsed.data);
    }
    if (this.#closed) return fail(res, 404, -32001, "Session not found");
    const initializing = messages.some(isInitializeRequest);
    if (initializing) {
      if (this.#ready && this.sessionId !== undefined) {
        return fail(res, 400, -32600, "Invalid Request: Server already initialized");
      }
      if (messages.length > 1) {
        return fail(
          res,
          400,
          -32600,
          "Invalid Request: Only one initialization request is allowed",
        );
      }
      this.sessionId = this.#newId?.();
      this.#ready = true;
      if (this.sessionId !== undefined) this.#initialized(this.sessionId);
    } else {
      const refused = this.#checkSession(req);
      if (refused !== undefined) return fail(res, ...refused);
    }
    const extra = { requestInfo: { headers: req.headers } };
    if (!messages.some(isJSONRPCRequest)) {
      for (const message of messages) this.onmessage?.(message, extra);
      res.writeHead(202).end();
      return;
    }
    const answers = messages.filter(isJSONRPCRequest).map(
      (request) =>
        new Promise<JSONRPCMessage>((resolve) => {
          const queue = this.#waiting.get(request.id);
          if (queue === undefined) this.#waiting.set(request.id, [resolve]);
          else queue.push(resolve);
        }),
    );
    for (const message of messages) this.onmessage?.(message, extra);
    const out = await Promise.all(answers);
    if (res.writableEnded || res.destroyed) return;
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (this.sessionId !== undefined) headers["mcp-session-id"] = this.sessionId;
    res.writeHead(200, headers);
    res.end(JSON.stringify(Array.isArray(body) ? out : out[0]));
  }

  #get(req: IncomingMessage, res: ServerResponse): void {
    if (!(req.headers.accept ?? "").includes("text/event-stream")) {
      fail(res, 406, -32000, "Not Acceptable: Client must accept text/event-stream");
      return;
    }
    const refused = this.#checkSession(req);
    if (refused !== undefined) {
      fail(res, ...refused);
      return;
    }
    if (this.#stream !== undefined && !this.#stream.writableEnded) {
      fail(res, 409, -32000, "Conflict: Only one SSE stream is allowed per session");
      return;
    }
    const headers: Record<string, string> = {
      "content-type": "text/event-stream",
      "cache-control": "no-cache, no-transform",
      connection: "keep-alive",
    };
    if (this.sessionId !== undefined) headers["mcp-session-id"] = this.sessionId;
    res.writeHead(200, headers);
    res.flushHeaders();
    this.#stream = res;
    res.once("close", () => {
      if (this.#stream === res) this.#stream = undefined;
    });
  }

  /** A session's requests after initialize: its ID, and a protocol version this SDK speaks. */
  #checkSession(req: IncomingMessage): [number, number, string] | undefined {
    if (this.#newId !== undefined) {
      if (!this.#ready) return [400, -32000, "Bad Request: Server not initialized"];
      const id = req.headers["mcp-session-id"];
      if (id === undefined) return [400, -32000, "Bad Request: Mcp-Session-Id header is required"];
      if (id !== this.sessionId) return [404, -32001, "Session not found"];
    }
    const version = req.headers["mcp-protocol-version"];
    if (typeof version === "string" && !SUPPORTED_PROTOCOL_VERSIONS.includes(version)) {
      return [400, -32000, `Bad Request: Unsupported protocol version: ${version}`];
    }
    return undefined;
  }
}

function isJson(type: string | undefined): boolean {
  if (type === "application/json") return true;
  return (type ?? "").split(";")[0]?.trim().toLowerCase() === "application/json";
}

function fail(res: ServerResponse, status: number, code: number, message: string): void {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null }));
}
