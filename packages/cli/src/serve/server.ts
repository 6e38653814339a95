import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { createKernel, explain, isTesseraError, type Kernel, TesseraError } from "@tessera/core";
import { z } from "zod";
import type { OpenedStores } from "../stores.js";
import { authenticate, explainPrincipal, type Principal } from "./principals.js";
import { readinessProbe } from "./readiness.js";

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
/** No `purpose`: it is the principal's, from the principals file (see `decide`). */
const AuthorizeBody = z.strictObject({
  action: segment,
  resource: z.strictObject({
    namespace: segment,
    path: z.array(segment).max(64),
    owner: segment.optional(),
  }),
  callId: segment.optional(),
});

type Reply = { status: number; body: unknown };

interface Service {
  readonly kernel: Kernel;
  readonly stores: OpenedStores;
  readonly principals: readonly Principal[];
  readonly ready: () => Promise<boolean>;
}

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

/**
 * The path and query of a request target; undefined when it has no path (`*`, garbage).
 * Origin-form (`/path?query`) is split by hand: `new URL("//", base)` reads `//` as the start
 * of a host name and throws, which once made `GET //` answer 503 before authentication.
 * Absolute-form (`http://host/path`) is read as HTTP/1.1 asks of every server.
 */
function requestTarget(raw = ""): { path: string; query: URLSearchParams } | undefined {
  if (raw.startsWith("/")) {
    const at = raw.indexOf("?");
    if (at === -1) return { path: raw, query: new URLSearchParams() };
    return { path: raw.slice(0, at), query: new URLSearchParams(raw.slice(at + 1)) };
  }
  if (!URL.canParse(raw)) return undefined;
  const url = new URL(raw);
  if (url.protocol !== "http:" && url.protocol !== "https:") return undefined;
  return { path: url.pathname, query: url.searchParams };
}

async function decide(kernel: Kernel, principal: Principal, body: unknown): Promise<Reply> {
  // Refused by name rather than as an unknown field: a caller that sends a purpose believes
  // it chooses one, and should learn that it does not.
  if (typeof body === "object" && body !== null && Object.hasOwn(body, "purpose")) {
    return problem(
      400,
      "invalid_request",
      "purpose is not a request field: it comes from the principal's configuration",
    );
  }
  const parsed = AuthorizeBody.safeParse(body);
  if (!parsed.success) {
    return problem(400, "invalid_request", "the body must be { action, resource, callId? }");
  }
  const { namespaceId, actor, authority, owner, purpose } = principal;
  const turn = await kernel.openTurnAuthority({
    namespaceId,
    actor,
    authority,
    ...(owner === undefined ? {} : { owner }),
    ...(purpose === undefined ? {} : { purpose }),
    traceId: randomUUID(),
  });
  try {
    return { status: 200, body: await turn.authorize(parsed.data) };
  } finally {
    await turn.close();
  }
}

async function authorizeRoute(
  request: IncomingMessage,
  kernel: Kernel,
  principal: Principal,
): Promise<Reply> {
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

async function explainRoute(
  query: URLSearchParams,
  service: Service,
  principal: Principal,
): Promise<Reply> {
  const callId = query.get("callId");
  if (!callId) return problem(400, "invalid_request", "callId is required");
  // Scoped to the whole principal: another principal's call ID reads exactly like an ID
  // nobody used (200, verdict unknown), so the answer tells nothing about anyone else.
  const explanation = await explain(service.stores.audit, callId, explainPrincipal(principal));
  return { status: 200, body: { verdict: explanation.verdict, summary: explanation.summary } };
}

async function route(request: IncomingMessage, service: Service): Promise<Reply> {
  const target = requestTarget(request.url);
  if (target === undefined) {
    return problem(400, "invalid_request", "the request target has no path");
  }
  const endpoint = `${request.method} ${target.path}`;
  // Liveness: the process answers. It never touches the store, so an outage cannot fail it;
  // readiness is the question that does.
  if (endpoint === "GET /healthz") return { status: 200, body: { ok: true } };
  if (endpoint === "GET /readyz") {
    return (await service.ready())
      ? { status: 200, body: { ready: true } }
      : problem(503, "unavailable", "the store does not answer: decisions cannot be taken");
  }
  if (endpoint !== "POST /v1/authorize" && endpoint !== "GET /v1/explain") {
    return problem(404, "not_found", "no such route");
  }
  const principal = authenticate(service.principals, request.headers.authorization);
  if (principal === undefined) {
    return problem(401, "unauthenticated", "a known bearer token is required");
  }
  return endpoint === "POST /v1/authorize"
    ? authorizeRoute(request, service.kernel, principal)
    : explainRoute(target.query, service, principal);
}

/**
 * Only a store that did not answer is an outage (503). Anything else is this service's own
 * fault: a 500, logged, so that no request can make the service report an outage it does
 * not have.
 */
function failure(error: unknown): Reply {
  if (isTesseraError(error) && error.code.endsWith("_unavailable")) {
    return problem(503, "unavailable", "the store did not answer: the request could not be served");
  }
  const detail = error instanceof Error ? (error.stack ?? error.message) : String(error);
  process.stderr.write(`tessera serve: unexpected failure: ${detail}\n`);
  return problem(500, "internal_error", "the request failed");
}

/** A listen failure the operator can act on, as a stable code instead of a stack. */
function listenFailure(error: unknown, where: string): unknown {
  const cause = { cause: error };
  switch ((error as NodeJS.ErrnoException).code) {
    case "EADDRINUSE":
      return new TesseraError(
        "address_in_use",
        `another process already listens on ${where}`,
        cause,
      );
    case "EADDRNOTAVAIL":
      return new TesseraError(
        "address_unavailable",
        `${where}: not an address of this machine`,
        cause,
      );
    case "EACCES":
      return new TesseraError("address_unavailable", `not permitted to listen on ${where}`, cause);
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return new TesseraError(
        "address_unavailable",
        `${where}: the host name does not resolve`,
        cause,
      );
    default:
      return error;
  }
}

export async function startServer(options: ServeOptions): Promise<RunningServer> {
  const { stores, principals } = options;
  const service: Service = {
    kernel: createKernel({ grants: stores.grants, usage: stores.usage, audit: stores.audit }),
    stores,
    principals,
    ready: readinessProbe(stores),
  };
  const server: Server = createServer((request, response: ServerResponse) => {
    route(request, service)
      .catch(failure)
      .then(({ status, body }) => {
        response.writeHead(status, { "content-type": "application/json" });
        response.end(JSON.stringify(body));
      });
  });
  const host = options.host ?? "127.0.0.1";
  const port = options.port ?? 8787;
  await new Promise<void>((resolve, reject) => {
    server.once("error", (error) =>
      reject(listenFailure(error, `${host.includes(":") ? `[${host}]` : host}:${port}`)),
    );
    server.listen(port, host, () => resolve());
  });
  const { address, port: bound } = server.address() as AddressInfo;
  return {
    url: `http://${address.includes(":") ? `[${address}]` : address}:${bound}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
