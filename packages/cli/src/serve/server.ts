import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { createKernel, explain, type Kernel, type ReadableAuditSink } from "@tessera/core";
import { z } from "zod";
import type { OpenedStores } from "../stores.js";
import { authenticate, type Principal } from "./principals.js";

/**
 * `tessera serve`: the kernel's decisions over HTTP, for hosts that are not written in
 * TypeScript. Each request is one turn: a lease is opened for the authenticated principal,
 * one decision is taken (spending a bounded grant atomically in the shared store), and the
 * lease is closed. A refusal is a 200 with `status: "denied"`: callers must read the status,
 * not only the HTTP code. The service does not deliver messages or run functions.
 */
export interface ServeOptions {
  readonly stores: OpenedStores;
  readonly principals: readonly Principal[];
  readonly host?: string;
  readonly port?: number;
}

export interface RunningServer {
  readonly url: string;
  close(): Promise<void>;
}

const MAX_BODY_BYTES = 64 * 1024;
const segment = z.string().min(1).max(512);
const AuthorizeBody = z.strictObject({
  action: segment,
  resource: z.strictObject({
    namespace: segment,
    path: z.array(segment).max(64),
    owner: segment.optional(),
  }),
  callId: segment.optional(),
  purpose: segment.optional(),
});

type Reply = { status: number; body: unknown };

function problem(status: number, code: string, message: string): Reply {
  return { status, body: { error: { code, message } } };
}

async function readJson(request: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new RangeError("body too large");
    chunks.push(chunk as Buffer);
  }
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

async function decide(kernel: Kernel, principal: Principal, body: unknown): Promise<Reply> {
  const parsed = AuthorizeBody.safeParse(body);
  if (!parsed.success) {
    return problem(400, "invalid_request", "the body must be { action, resource, callId? }");
  }
  const { purpose, ...request } = parsed.data;
  const turn = await kernel.openTurnAuthority({
    namespaceId: principal.namespaceId,
    actor: principal.actor,
    authority: principal.authority,
    ...(principal.owner === undefined ? {} : { owner: principal.owner }),
    ...(purpose === undefined ? {} : { purpose }),
    traceId: randomUUID(),
  });
  try {
    return { status: 200, body: await turn.authorize(request) };
  } finally {
    await turn.close();
  }
}

async function route(
  request: IncomingMessage,
  kernel: Kernel,
  audit: ReadableAuditSink,
  principals: readonly Principal[],
): Promise<Reply> {
  const url = new URL(request.url ?? "/", "http://service");
  if (request.method === "GET" && url.pathname === "/healthz")
    return { status: 200, body: { ok: true } };
  const principal = authenticate(principals, request.headers.authorization);
  if (principal === undefined)
    return problem(401, "unauthenticated", "a known bearer token is required");

  if (request.method === "POST" && url.pathname === "/v1/authorize") {
    let body: unknown;
    try {
      body = await readJson(request);
    } catch (error) {
      return error instanceof RangeError
        ? problem(413, "invalid_request", `the body is larger than ${MAX_BODY_BYTES} bytes`)
        : problem(400, "invalid_request", "the body is not valid JSON");
    }
    return decide(kernel, principal, body);
  }
  if (request.method === "GET" && url.pathname === "/v1/explain") {
    const callId = url.searchParams.get("callId");
    if (!callId) return problem(400, "invalid_request", "callId is required");
    const explanation = await explain(audit, callId);
    // A principal may read only its own decisions.
    const own = explanation.events.every(
      (e) => e.actor === principal.actor && e.namespaceId === principal.namespaceId,
    );
    if (!own) return problem(404, "not_found", "no decision of yours has that call ID");
    return { status: 200, body: { verdict: explanation.verdict, summary: explanation.summary } };
  }
  return problem(404, "not_found", "no such route");
}

export async function startServer(options: ServeOptions): Promise<RunningServer> {
  const { stores, principals } = options;
  const kernel = createKernel({ grants: stores.grants, usage: stores.usage, audit: stores.audit });
  const server: Server = createServer((request, response: ServerResponse) => {
    route(request, kernel, stores.audit, principals)
      .catch(() => problem(503, "unavailable", "the decision could not be taken"))
      .then(({ status, body }) => {
        response.writeHead(status, { "content-type": "application/json" });
        response.end(JSON.stringify(body));
      });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 8787, options.host ?? "127.0.0.1", () => resolve());
  });
  const { address, port } = server.address() as AddressInfo;
  return {
    url: `http://${address.includes(":") ? `[${address}]` : address}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
