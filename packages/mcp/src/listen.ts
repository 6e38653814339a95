import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { ErrorCode, type JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { ClaimStore } from "@tessera/core";
import {
  type GrantStore,
  type GrantUsageStore,
  InMemoryAuditSink,
  InMemoryClaimStore,
  InMemoryGrantStore,
  InMemoryGrantUsageStore,
  openStores,
  type ReadableAuditSink,
  TesseraError,
} from "@tessera/core";
import { z } from "zod";
import { type ProtectedResource, resourceMetadata, resourceMetadataUrl } from "./bearer.js";
import type { GatewayConfig } from "./config.js";
import { existingStore } from "./config-paths.js";
import { createMcpGateway, type McpGateway } from "./gateway.js";
import { type DecisionObserver, observeActs, observeAudit } from "./observe.js";
import { DrainingTransport, GATEWAY_STOPPING } from "./stdio-drain.js";

export interface ListeningGateway {
  /** The MCP endpoint, `http://host:port/mcp`. */
  readonly url: string;
  /**
   * Graceful: stops accepting, lets the calls under way answer (up to `drainMs`, then cuts
   * what is still open), closing each connection once it is idle.
   */
  close(): Promise<void>;
}

/** The answer to a request that arrives while the gateway closes (JSON-RPC, no id). */
const STOPPING = JSON.stringify({ jsonrpc: "2.0", error: GATEWAY_STOPPING, id: null });

/** Serves the gateway's Streamable HTTP endpoint at `/mcp` on a node:http server. */
export async function listenMcpGateway(
  gateway: McpGateway,
  options: {
    readonly host?: string;
    readonly port?: number;
    /** How long `close()` lets calls under way answer before cutting them (default 10 s). */
    readonly drainMs?: number;
  } = {},
): Promise<ListeningGateway> {
  let closing = false;
  const closeIdleWhileClosing = () => {
    if (closing) server.closeIdleConnections();
  };
  /** Open `GET /mcp` streams (server-to-client messages): they carry no call's answer. */
  const streams = new Set<ServerResponse>();
  const server = createServer((req, res) => {
    // While closing, a connection goes once its answer is out (keep-alive would hold it
    // open), also for a call that was running when the close began.
    res.once("finish", closeIdleWhileClosing);
    if (closing) {
      // A request on a connection kept alive from before the close: nothing new starts.
      res.writeHead(503, { "content-type": "application/json", connection: "close" });
      res.end(STOPPING);
      return;
    }
    const path = (req.url ?? "").split("?")[0];
    if (req.method === "GET" && path === "/mcp") {
      streams.add(res);
      res.once("close", () => streams.delete(res));
    }
    const resource = gateway.protectedResource;
    if (
      resource !== undefined &&
      req.method === "GET" &&
      (path === "/.well-known/oauth-protected-resource" ||
        path === new URL(resourceMetadataUrl(resource.resource)).pathname)
    ) {
      // RFC 9728: where a client that got our 401 learns which issuer mints our tokens.
      res.writeHead(200, { "content-type": "application/json", "cache-control": "max-age=300" });
      res.end(JSON.stringify(resourceMetadata(resource)));
      return;
    }
    if (path !== "/mcp") {
      res.writeHead(404, { "content-type": "application/json" });
      res.end('{"error":"not_found"}');
      return;
    }
    gateway.handleHttp(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500, { "content-type": "application/json" });
      res.end();
    });
  });
  const host = options.host ?? "127.0.0.1";
  await new Promise<void>((resolve, reject) => {
    server.once("error", (error: NodeJS.ErrnoException) => {
      const code = error.code === "EADDRINUSE" ? "address_in_use" : "address_unavailable";
      reject(
        new TesseraError(code, `cannot listen on ${host}:${options.port ?? 0}`, { cause: error }),
      );
    });
    server.listen(options.port ?? 0, host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const shown = host.includes(":") ? `[${host}]` : host;
  return Object.freeze({
    url: `http://${shown}:${port}/mcp`,
    // Cutting every connection at once cut the calls under way too: their tools may have run,
    // and their callers were left with a broken connection and the calls in doubt.
    close: () =>
      new Promise<void>((resolve) => {
        closing = true;
        const cut = setTimeout(() => server.closeAllConnections(), options.drainMs ?? 10_000);
        server.close(() => {
          clearTimeout(cut);
          resolve();
        });
        server.closeIdleConnections();
        // A client keeps its message stream open for as long as it is connected: ended
        // here, or the drain would last until `drainMs` whenever a client is connected.
        for (const stream of streams) stream.end();
      }),
  });
}

/** A gateway opened from a checked config: its stores (a URL's, or memory) and its upstreams. */
export interface OpenedGateway {
  readonly gateway: McpGateway;
  readonly grants: GrantStore;
  readonly usage: GrantUsageStore;
  readonly claims: ClaimStore;
  readonly audit: ReadableAuditSink;
  /** Closes the gateway, then the stores it opened. */
  close(): Promise<void>;
}

/**
 * Opens the config's stores and connects its upstreams. A `sqlite:` store file must exist (or
 * the URL say `create=true`): a gateway never starts an empty claim history by accident.
 */
export async function openMcpGateway(
  config: GatewayConfig,
  /** The identity provider's tokens (built by the host: `tessera mcp` from `config.identity`). */
  extra: {
    readonly protectedResource?: ProtectedResource;
    /** Each decision's audit event once the store took it (`tessera mcp` logs a line each). */
    readonly onDecision?: DecisionObserver;
  } = {},
): Promise<OpenedGateway> {
  const bundle =
    config.stores === undefined
      ? {
          grants: new InMemoryGrantStore(),
          usage: new InMemoryGrantUsageStore(),
          claims: new InMemoryClaimStore(),
          audit: new InMemoryAuditSink(),
          close: async () => {},
        }
      : await openStores(existingStore(config.stores));
  const seen = extra.onDecision;
  let gateway: McpGateway;
  try {
    gateway = await createMcpGateway({
      upstreams: config.upstreams,
      tools: config.tools,
      principals: config.principals,
      grants: bundle.grants,
      usage: bundle.usage,
      claims: bundle.claims,
      audit: seen === undefined ? bundle.audit : observeAudit(bundle.audit, seen),
      ...("acts" in bundle
        ? { acts: seen === undefined ? bundle.acts : observeActs(bundle.acts, seen) }
        : {}),
      limits: config.limits,
      stateless: config.stateless,
      ...(extra.protectedResource === undefined
        ? {}
        : { protectedResource: extra.protectedResource }),
    });
  } catch (error) {
    await bundle.close();
    throw error;
  }
  return Object.freeze({
    gateway,
    grants: bundle.grants,
    usage: bundle.usage,
    claims: bundle.claims,
    audit: bundle.audit,
    close: async () => {
      await gateway.close();
      await bundle.close();
    },
  });
}

/**
 * Serves one client over this process's stdin/stdout as the principal whose token this is.
 * Resolves once serving; `closed` settles when the client goes away (stdin ends).
 */
export async function serveMcpStdio(
  gateway: McpGateway,
  token: string,
  options: {
    /** How long `close()` lets calls under way answer before cutting them (default 10 s). */
    readonly drainMs?: number;
  } = {},
): Promise<{
  readonly closed: Promise<void>;
  /**
   * Graceful, as `ListeningGateway.close()`: a request read from now on is answered with a
   * JSON-RPC error (-32000) and runs nothing; the calls under way answer (up to `drainMs`, then
   * they are cut); then the connection closes.
   */
  close(): Promise<void>;
}> {
  const transport = new DrainingTransport(new StdioServerTransport());
  // The SDK's transport drops a line it cannot read (reporting it to `onerror` only): the
  // client then waits for an answer that never comes. JSON-RPC answers it, with a null id.
  transport.onerror = (error) => {
    const answer = unreadableLineAnswer(error);
    if (answer !== undefined) void transport.send(answer).catch(() => undefined);
  };
  const closed = new Promise<void>((resolve) => {
    transport.onclose = () => resolve();
    process.stdin.once("end", () => resolve());
  });
  await gateway.serve(transport, token);
  return { closed, close: () => transport.stop(options.drainMs ?? 10_000) };
}

/**
 * The JSON-RPC error for a stdio line the SDK could not read: not JSON is a parse error
 * (-32700); JSON that is no JSON-RPC message (`[]`, `null`, no method) an invalid request
 * (-32600). Its id is null (JSON-RPC 2.0 §5: the request's id could not be read). Any other
 * transport error (stdin failing, a line over the buffer's limit, which closes the transport)
 * is not a line's, and gets no answer.
 */
function unreadableLineAnswer(error: unknown): JSONRPCMessage | undefined {
  const rpcError =
    error instanceof SyntaxError
      ? { code: ErrorCode.ParseError, message: "the line is not JSON" }
      : error instanceof z.ZodError
        ? { code: ErrorCode.InvalidRequest, message: "the line is not a JSON-RPC 2.0 message" }
        : undefined;
  if (rpcError === undefined) return undefined;
  // The SDK's message type has no null id; the wire form is what JSON-RPC asks for.
  return { jsonrpc: "2.0", id: null, error: rpcError } as unknown as JSONRPCMessage;
}
