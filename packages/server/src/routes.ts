import { randomUUID } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { explain, isTesseraError, type Kernel } from "@tessera/core";
import { z } from "zod";
import { MAX_BODY_BYTES, problem, type Reply, readJson, requestTarget } from "./http.js";
import { authenticate, explainPrincipal, type Principal } from "./principals.js";
import type { ServiceStores } from "./service.js";

/** What every request is served with: built once by `createTesseraService`. */
export interface Routes {
  readonly kernel: Kernel;
  readonly stores: ServiceStores;
  readonly principals: readonly Principal[];
  readonly ready: () => Promise<boolean>;
}

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

/**
 * One request, one answer. Each decision is one turn: a lease is opened for the authenticated
 * principal, one decision is taken (spending a bounded grant atomically in the shared store),
 * and the lease is closed. A refusal is a 200 with `status: "denied"`: callers must read the
 * status, not only the HTTP code.
 */
export async function route(request: IncomingMessage, routes: Routes): Promise<Reply> {
  const target = requestTarget(request.url);
  if (target === undefined) {
    return problem(400, "invalid_request", "the request target has no path");
  }
  const endpoint = `${request.method} ${target.path}`;
  // Liveness: the process answers. It never touches the store, so an outage cannot fail it;
  // readiness is the question that does.
  if (endpoint === "GET /healthz") return { status: 200, body: { ok: true } };
  if (endpoint === "GET /readyz") {
    return (await routes.ready())
      ? { status: 200, body: { ready: true } }
      : problem(503, "unavailable", "the store does not answer: decisions cannot be taken");
  }
  if (endpoint !== "POST /v1/authorize" && endpoint !== "GET /v1/explain") {
    return problem(404, "not_found", "no such route");
  }
  const principal = authenticate(routes.principals, request.headers.authorization);
  if (principal === undefined) {
    return problem(401, "unauthenticated", "a known bearer token is required");
  }
  return endpoint === "POST /v1/authorize"
    ? authorizeRoute(request, routes.kernel, principal)
    : explainRoute(target.query, routes, principal);
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

async function explainRoute(
  query: URLSearchParams,
  routes: Routes,
  principal: Principal,
): Promise<Reply> {
  const callId = query.get("callId");
  if (!callId) return problem(400, "invalid_request", "callId is required");
  // Scoped to the whole principal: another principal's call ID reads exactly like an ID
  // nobody used (200, verdict unknown), so the answer tells nothing about anyone else.
  const explanation = await explain(routes.stores.audit, callId, explainPrincipal(principal));
  return { status: 200, body: { verdict: explanation.verdict, summary: explanation.summary } };
}

/**
 * Only a store that did not answer is an outage (503). Anything else is this service's own
 * fault: a 500, logged, so that no request can make the service report an outage it does
 * not have.
 */
export function failure(error: unknown): Reply {
  if (isTesseraError(error) && error.code.endsWith("_unavailable")) {
    return problem(503, "unavailable", "the store did not answer: the request could not be served");
  }
  logUnexpected(error);
  return problem(500, "internal_error", "the request failed");
}

export function logUnexpected(error: unknown): void {
  const detail = error instanceof Error ? (error.stack ?? error.message) : String(error);
  process.stderr.write(`tessera serve: unexpected failure: ${detail}\n`);
}
