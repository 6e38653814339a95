import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  ErrorCode,
  isInitializeRequest,
  ListToolsRequestSchema,
  McpError,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";
import {
  type ActLedger,
  type AuditSink,
  type ClaimStore,
  type Clock,
  createKernel,
  type GrantSource,
  type GrantUsageStore,
  systemClock,
  TesseraError,
} from "@tessera/core";
import { gatewayActs } from "./acts.js";
import { bearerPrincipal, type ProtectedResource } from "./bearer.js";
import { handleToolsCall } from "./call-request.js";
import { type Caller, callTool, type PipelineParts, retire } from "./calls.js";
import { type Limits, LimitsSchema, type Principal } from "./config.js";
import { gatewayError } from "./errors.js";
import { header, readJson, repeatsAnId, requestIds, rpcError } from "./http-body.js";
import { CallLedger } from "./ledger.js";
import { checkPrincipals, checkRules } from "./options-check.js";
import { accessContext, authenticate, principalKey } from "./principals.js";
import { logStoreFailure, type StoreFailureObserver } from "./store-failures.js";
import { fixedSource, TOOLS_CALL, toolGrants } from "./tool-grants.js";
import { endCall, incomingTrace, startCall } from "./tracing.js";
import type { McpTransport, UpstreamInput } from "./types.js";
import { connectUpstreams, type Upstreams } from "./upstreams.js";

export interface McpGatewayOptions {
  /** Upstream MCP servers by name: a stdio command, a Streamable HTTP URL, or a transport. */
  readonly upstreams: Readonly<Record<string, UpstreamInput>>;
  /** Per server and tool: arguments whose values become path segments (`{ bind: ["to"] }`). */
  readonly tools?: Readonly<Record<string, Readonly<Record<string, { bind?: string[] }>>>>;
  /** Bearer tokens (as SHA-256) and the turn identity each one calls as. */
  readonly principals: readonly Principal[];
  readonly grants: GrantSource;
  readonly usage?: GrantUsageStore;
  /** Shared by every gateway process that must refuse the others' replays. Memory when absent. */
  readonly claims?: ClaimStore;
  readonly audit?: AuditSink;
  /**
   * The act ledger of the same stores (a store bundle's `acts`): a call's claim, spend and
   * decision's event are then one write before anything is forwarded. Needs `claims` from the
   * same bundle (answers are settled into the claim it recorded). Without it the gateway
   * composes one of `claims`, `usage` and `audit`, one write after another.
   */
  readonly acts?: ActLedger;
  readonly clock?: Clock;
  readonly limits?: Partial<Limits>;
  /** Streamable HTTP without MCP sessions: every call then needs an idempotency key. */
  readonly stateless?: boolean;
  /**
   * Access tokens of the host's identity provider, beside `principals` (HTTP only): the
   * verifier, this gateway's resource URL and its issuers, for the 401 challenge and the
   * Protected Resource Metadata `listenMcpGateway` serves.
   */
  readonly protectedResource?: ProtectedResource;
  /**
   * Told of each store write the gateway answered without: a failed call's own audit event, a
   * forwarded call's answer whose settle failed (retried for a while). One JSON line on
   * standard error when absent.
   */
  readonly onStoreFailure?: StoreFailureObserver;
}

export interface McpGateway {
  /** The Streamable HTTP endpoint as a node:http handler (mount it at any path). */
  handleHttp(req: IncomingMessage, res: ServerResponse): Promise<void>;
  /** Serves one connection (stdio, say) for the principal whose bearer token this is. */
  serve(transport: McpTransport, token: string): Promise<void>;
  /** The tools this principal may run now, as the gateway lists them. */
  listTools(principal: Principal): Promise<Tool[]>;
  /** Closes every session and upstream client; the stores stay the host's to close. */
  close(): Promise<void>;
  /** As given in the options: what `listenMcpGateway` publishes as resource metadata. */
  readonly protectedResource?: ProtectedResource;
}

const INFO = { name: "tessera-mcp-gateway", version: "0.1.0" };

interface Session {
  readonly transport: StreamableHTTPServerTransport;
  readonly owner: string;
  /** Epoch ms of its last request: a client that vanishes without DELETE is swept. */
  seen: number;
  /**
   * Ids of the requests whose POST is still open. The SDK's transport routes an answer to the
   * POST by id: a second request with a live id took the route, and the first POST never got
   * its answer.
   */
  readonly answering: Set<string>;
}

/**
 * Builds the gateway: connects every upstream (one SDK client each), reads their tools, and
 * returns the client-facing MCP server as an HTTP handler and a `serve(transport)` for stdio.
 */
export async function createMcpGateway(options: McpGatewayOptions): Promise<McpGateway> {
  if (typeof options?.grants?.listGrants !== "function") {
    throw new TesseraError("invalid_config", "the MCP gateway needs a grant source");
  }
  const principals = checkPrincipals(options.principals, options.protectedResource !== undefined);
  const limits = LimitsSchema.parse(options.limits ?? {});
  const rules = checkRules(options.tools ?? {});
  const servers = new Set<Server>();
  // An upstream's tools changed (or it restarted with others): every connected client is told.
  const toolsChanged = (): void => {
    for (const server of servers) void server.sendToolListChanged().catch(() => undefined);
  };
  const clock = options.clock ?? systemClock;
  const upstreams: Upstreams = await connectUpstreams(
    options.upstreams,
    rules,
    toolsChanged,
    limits.restartBackoffMs,
    () => clock.now(),
  );
  const { acts, claims } = gatewayActs(options);
  const onStoreFailure = options.onStoreFailure ?? logStoreFailure;
  const parts: PipelineParts = {
    catalog: upstreams.catalog,
    grants: options.grants,
    usage: options.usage,
    audit: options.audit,
    acts,
    clock,
    ledger: new CallLedger(claims, { onStoreFailure }),
    limits,
    onStoreFailure,
    kernels: new Map(),
    deciding: new Map(),
  };
  const sessions = new Map<string, Session>();
  const stateless = options.stateless === true;

  const listTools = async (principal: Principal): Promise<Tool[]> => {
    let material: readonly unknown[];
    try {
      material = await parts.grants.listGrants(principal.namespaceId, principal.actor);
    } catch {
      // An error, not an empty list: a client must not read an outage as "nothing granted".
      throw gatewayError(
        "grant_store_unavailable",
        "the grants could not be read: the tools cannot be listed",
      );
    }
    const visible: Tool[] = [];
    for (const entry of parts.catalog.values()) {
      const reaching = toolGrants(material, entry);
      if (reaching.length === 0) continue;
      const kernel = createKernel({
        grants: fixedSource(reaching),
        ...(parts.usage === undefined ? {} : { usage: parts.usage }),
        clock,
      });
      const turn = await kernel.openTurnAuthority(accessContext(principal, randomUUID()));
      const actions = await turn.listTools();
      await turn.close();
      if (actions.includes(TOOLS_CALL)) visible.push(entry.definition);
    }
    return visible;
  };

  /** One SDK server per connection, bound to the principal that opened it. */
  const serverFor = (principal: Principal, fixedSession: string | undefined): Server => {
    const server = new Server(INFO, { capabilities: { tools: { listChanged: true } } });
    server.setRequestHandler(ListToolsRequestSchema, async () => ({
      tools: await listTools(principal),
    }));
    handleToolsCall(server, async (request, extra) => {
      const name = request.params.name;
      const trace = startCall(
        incomingTrace(request.params._meta, extra.requestInfo?.headers),
        parts.catalog.has(name) ? name : undefined,
      );
      const caller: Caller = {
        principal,
        session: stateless ? undefined : (extra.sessionId ?? fixedSession),
        requestId: extra.requestId,
        trace,
      };
      try {
        const result = await callTool(parts, caller, request.params);
        endCall(trace, { result });
        return result;
      } catch (error) {
        endCall(trace, { error });
        if (error instanceof McpError) throw error;
        // Nothing internal reaches the caller.
        throw gatewayError("internal_error", "the gateway failed this call");
      }
    });
    servers.add(server);
    server.onclose = () => servers.delete(server);
    return server;
  };

  /** Closes sessions idle past the limit; run when a session opens, so the map stays bounded. */
  const sweep = (): void => {
    const before = Date.now() - limits.sessionIdleMs;
    for (const [id, session] of sessions) {
      if (session.seen >= before) continue;
      sessions.delete(id);
      void session.transport.close();
    }
  };

  const handleHttp = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    let principal = authenticate(principals, header(req, "authorization"));
    if (principal === undefined && options.protectedResource !== undefined) {
      // No static principal's: the identity provider's access token, or its challenge.
      const found = await bearerPrincipal(options.protectedResource, header(req, "authorization"));
      if ("status" in found) {
        if (found.challenge !== undefined) res.setHeader("WWW-Authenticate", found.challenge);
        return rpcError(res, found.status, ErrorCode.InvalidRequest, found.message);
      }
      principal = found;
    }
    if (principal === undefined) {
      res.setHeader("WWW-Authenticate", 'Bearer realm="tessera-mcp"');
      return rpcError(res, 401, ErrorCode.InvalidRequest, "a valid bearer token is required");
    }
    const owner = principalKey(principal);
    let body: unknown;
    if (req.method === "POST") {
      const read = await readJson(req, limits.maxArgumentBytes + 65_536);
      if (read.kind === "too_large") {
        res.setHeader("Connection", "close");
        return rpcError(res, 413, ErrorCode.InvalidRequest, "the request body is too large");
      }
      if (read.kind === "not_json") {
        return rpcError(res, 400, ErrorCode.ParseError, "the request body is not JSON");
      }
      body = read.value;
      if (repeatsAnId(body)) {
        // The SDK's transport maps answers to requests by id: a repeated id would get one
        // answer, the repeat's (a call_in_progress), and lose the other. Nothing runs.
        return rpcError(
          res,
          400,
          ErrorCode.InvalidRequest,
          "the batch repeats a request id: give each request its own",
        );
      }
    }
    if (stateless) {
      if (req.method !== "POST") {
        return rpcError(res, 405, ErrorCode.InvalidRequest, "stateless: POST only");
      }
      const transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: undefined,
        enableJsonResponse: true,
      });
      const server = serverFor(principal, undefined);
      res.on("close", () => {
        void transport.close();
        void server.close();
      });
      await server.connect(transport);
      return transport.handleRequest(req, res, body);
    }
    const sessionId = header(req, "mcp-session-id");
    if (sessionId !== undefined) {
      const session = sessions.get(sessionId);
      // Another principal's session is answered exactly like one that does not exist.
      if (session === undefined || session.owner !== owner) {
        return rpcError(res, 404, ErrorCode.InvalidRequest, "no such session");
      }
      session.seen = Date.now();
      const ids = requestIds(body);
      if (ids.some((id) => session.answering.has(id))) {
        return rpcError(
          res,
          409,
          ErrorCode.InvalidRequest,
          "a request with this id is still being answered in this session: use another id",
        );
      }
      if (ids.length > 0) {
        for (const id of ids) session.answering.add(id);
        res.once("close", () => {
          for (const id of ids) session.answering.delete(id);
        });
      }
      return session.transport.handleRequest(req, res, body);
    }
    if (req.method !== "POST" || !isInitializeRequest(body)) {
      return rpcError(res, 400, ErrorCode.InvalidRequest, "no session: send initialize first");
    }
    sweep();
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      enableJsonResponse: true,
      onsessioninitialized: (id) => {
        sessions.set(id, { transport, owner, seen: Date.now(), answering: new Set() });
      },
    });
    const server = serverFor(principal, undefined);
    await server.connect(transport);
    // After connect: the SDK server wraps `onclose`, and this must run beside its own.
    const closed = transport.onclose;
    transport.onclose = () => {
      closed?.();
      if (transport.sessionId !== undefined) sessions.delete(transport.sessionId);
    };
    return transport.handleRequest(req, res, body);
  };

  const serve = async (transport: McpTransport, token: string): Promise<void> => {
    if (principals.length === 0) {
      throw new TesseraError(
        "invalid_config",
        "this gateway has no static principal (JWT-only), and a stdio connection carries no bearer token to verify: add a principal for stdio, or serve HTTP",
      );
    }
    const principal = authenticate(principals, token, true);
    if (principal === undefined) {
      // The config is fine; the caller's credential is not (docs/codes.md).
      throw new TesseraError("unauthenticated", "the token names no principal of this gateway");
    }
    // One connection is one live MCP session: its JSON-RPC ids are keys within it.
    await serverFor(principal, `stdio-${randomUUID()}`).connect(transport as unknown as Transport);
  };

  const close = async (): Promise<void> => {
    await Promise.allSettled([...servers].map((server) => server.close()));
    sessions.clear();
    // Answers still being written after their replies land before the host closes the store,
    // and so do the kernels' denial events and their last try of each pending withdrawal.
    await parts.ledger.drain();
    await Promise.allSettled([...parts.kernels.values()].map(({ kernel }) => retire(kernel)));
    parts.kernels.clear();
    await upstreams.close();
  };

  return Object.freeze({
    handleHttp,
    serve,
    listTools,
    close,
    ...(options.protectedResource === undefined
      ? {}
      : { protectedResource: options.protectedResource }),
  });
}
