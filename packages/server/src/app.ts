import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createKernel, type MessageTransport } from "@tessera/core";
import { bearerToken, ROUTES, type RouteSpec } from "@tessera/core/http";
import { composeActLedger } from "@tessera/core/store-kit";
import Fastify, { type FastifyInstance, type FastifyReply, LogController } from "fastify";
import { answerClientError } from "./client-errors.js";
import { WriteRounds } from "./coalesce.js";
import type { ServiceContext } from "./context.js";
import { DecisionLog } from "./decision-log.js";
import { HttpProblem, handleError } from "./errors.js";
import { type JwtIdentityInput, parseJwtIdentity } from "./identity/config.js";
import { JwtVerifier, looksLikeJwt } from "./identity/verify.js";
import { cachedJwtPrincipal, jwtPrincipal } from "./jwt-auth.js";
import { redactCredentials } from "./log-redaction.js";
import { Metrics } from "./metrics.js";
import { openApiDocument } from "./openapi.js";
import { PrincipalSet } from "./principal-set.js";
import { authenticate, type Principal, requireCallers } from "./principals.js";
import { readinessProbe } from "./readiness.js";
import { AnswerWrites } from "./retry.js";
import { type A2uiOptions, a2uiRoutes, type GateRoutes } from "./routes/a2ui.js";
import { decisionRoutes } from "./routes/decisions.js";
import { deriveRoute } from "./routes/derive.js";
import { grantRoutes } from "./routes/grants.js";
import type { ServiceStores } from "./stores.js";
import { fastifyTimeouts, type ServerTimeouts, serverTimeouts } from "./timeouts.js";
import { setDeliveryContext, tracedActs } from "./tracing.js";

export const MAX_BODY_BYTES = 64 * 1024;

const PROBE_PATHS: ReadonlySet<string> = new Set(["/healthz", "/readyz", "/metrics"]);
const DECISION_PATHS: ReadonlySet<string> = new Set<string>(
  [ROUTES.authorize, ROUTES.sendMessage, ROUTES.a2uiClaim, ROUTES.a2uiCall].map((r) => r.path),
);

export interface AppOptions {
  readonly stores: ServiceStores;
  /** Fixed, or a `PrincipalSet` the host may replace while the service runs. */
  readonly principals: readonly Principal[] | PrincipalSet;
  /**
   * JWT access tokens from the host's identity provider (`@tessera/server/identity`): a
   * checked config, or a verifier the host built (its key cache shared). A bearer token that
   * is no static principal's is verified as one; both kinds are accepted side by side.
   */
  readonly identity?: JwtIdentityInput | JwtVerifier;
  /** Delivers authorized messages; without one, sends are unlisted and refused `tool_unavailable`. */
  readonly transport?: MessageTransport;
  /** JSON logs (pino): `false` for none; a stream to capture them. Default: stdout, info. */
  readonly log?:
    | false
    | { readonly level?: string; readonly stream?: { write(line: string): void } };
  /** How long a retry waits for the first request of its call ID (default 5 s). */
  readonly retryWaitMs?: number;
  /** The A2UI gate's catalogs and function endpoint; without it the A2UI routes answer 404. */
  readonly a2ui?: A2uiOptions;
  /**
   * `denials: "after-reply"` (default): a refusal that carries no call ID changes nothing, so
   * its audit event is written after the answer, in the store's next write (a crash can lose
   * the events of that window, ≤ 10 ms; never an allowed act's record, which is durable before
   * its effect). A sink that fails one makes the next refusals wait for their own write, and
   * answer 503 while it keeps failing. `"before-reply"`: every event before its answer.
   */
  readonly audit?: { readonly denials?: "after-reply" | "before-reply" };
  /**
   * How long a client may take to send a request, or stay idle (`DEFAULT_TIMEOUTS` when
   * absent). Applied to the server Fastify makes (`listen`, or `app.listen`); a host that
   * mounts the request listener in its own server sets that server's own.
   */
  readonly timeouts?: ServerTimeouts;
  /** Set by `listen`: the verifier in use, so a reload can reconfigure it (SIGHUP). */
  readonly onVerifier?: (verifier: JwtVerifier) => void;
  /** Set by `createTesseraService`: the request listener, for a host's own server. */
  readonly onHandler?: (handler: (req: IncomingMessage, res: ServerResponse) => void) => void;
}

/**
 * The service as a Fastify app. Authentication runs first (`onRequest`), before the body is
 * read: an unauthenticated caller costs no parsing and no store access. Unknown paths and
 * wrong methods never reach it.
 */
/** The longest path parameter the routes read: a 512-character grant ID, percent-encoded. */
const MAX_PATH_PARAM_CHARS = 512 * 9;

export function buildApp(options: AppOptions): FastifyInstance {
  const metrics = new Metrics();
  // Timed inside the rounds: the histogram measures the store, not the wait for a round.
  const rounds = new WriteRounds();
  const stores = rounds.stores(metrics.timed(options.stores));
  const principals =
    options.principals instanceof PrincipalSet
      ? options.principals
      : new PrincipalSet(options.principals);
  // Each decision's event passes through the log on its way to the store: one line each.
  const decisions = new DecisionLog();
  // Every decision is one act: claim (retry-safe calls), spend and event in one write; a
  // traced request's act is written in a `tessera.store.write` span (tracing.ts).
  // The A2UI routes' own lookup, set once they are registered (below).
  let gateTraceOf: GateRoutes["traceOf"] = () => undefined;
  const acts = decisions.acts(
    tracedActs(
      stores.acts ?? composeActLedger(stores),
      (event) => decisions.traceOf(event) ?? gateTraceOf(event),
    ),
  );
  const transport =
    options.transport === undefined ? undefined : tracedTransport(options.transport, decisions);
  // Set once the app (and its log) exists, below.
  let abandoned: (id: string) => void = () => undefined;
  const context: ServiceContext = {
    acts,
    decisions,
    kernel: createKernel({
      grants: stores.grants,
      usage: stores.usage,
      audit: decisions.audit(stores.audit),
      acts,
      denials: options.audit?.denials ?? "after-reply",
      ...(transport === undefined ? {} : { transport }),
    }),
    stores,
    // Read on every request: a replaced set is in force from the next one.
    get principals() {
      return principals.current;
    },
    metrics,
    retry: {
      waitMs: options.retryWaitMs ?? 5000,
      // An answer the store refuses is tried again until it lands (retry.ts); each failed try
      // is counted.
      writes: new AnswerWrites({
        onFailure: () => metrics.answerWriteFailures.inc(),
        // After close the app's log is still there; the answer's own request is long gone.
        onAbandoned: (id) => abandoned(id),
      }),
    },
  };
  const log = options.log ?? {};
  let keyLoadFailed = (_error: unknown) => {};
  const verifier =
    options.identity === undefined || options.identity instanceof JwtVerifier
      ? options.identity
      : new JwtVerifier(parseJwtIdentity(options.identity), {
          onKeyLoadError: (error) => keyLoadFailed(error),
        });
  // JWT-only is fine (no static principal); neither way in is a configuration mistake.
  requireCallers(principals.current, verifier !== undefined);
  if (verifier !== undefined) options.onVerifier?.(verifier);
  const app: FastifyInstance = Fastify<Server>({
    bodyLimit: MAX_BODY_BYTES,
    // The caller's `x-request-id` when it is a sane token (so a host can follow one request
    // through its own logs and ours), else one of our own: a hostile string never reaches a
    // log line or a header.
    genReqId: (request) => saneRequestId(request.headers["x-request-id"]) ?? randomUUID(),
    requestIdHeader: false,
    return503OnClosing: true,
    // Fastify's two lines per request (incoming, completed) say nothing of the decision; the
    // service writes one line per decision and one per other request (onResponse below).
    logController: new LogController({ disableRequestLogging: true }),
    ...fastifyTimeouts(serverTimeouts(options.timeouts)),
    // A target Fastify cannot read (a bad absolute-form URL) is answered in the service's shape.
    frameworkErrors: (_error, _request, reply) => {
      const problem = new HttpProblem("invalid_request", "the request target is malformed");
      void (reply as FastifyReply).code(problem.status).send(problem.body());
    },
    // A request that never parsed (headers too large, malformed, too slow) is answered in the
    // service's shape too.
    clientErrorHandler: answerClientError,
    forceCloseConnections: "idle",
    // A grant ID is up to 512 characters, each up to nine in the path once percent-encoded
    // (three UTF-8 bytes); Fastify's default of 100 made longer IDs impossible to revoke.
    routerOptions: { maxParamLength: MAX_PATH_PARAM_CHARS },
    ...(options.onHandler === undefined
      ? {}
      : {
          serverFactory: (handler: (req: IncomingMessage, res: ServerResponse) => void) => {
            options.onHandler?.(handler);
            return createServer(handler);
          },
        }),
    logger:
      log === false
        ? false
        : {
            level: log.level ?? "info",
            ...(log.stream === undefined ? {} : { stream: log.stream }),
            // Credentials a client sends in headers are never written; in the target, see
            // redactCredentials, which sees every line whichever part of Fastify wrote it.
            redact: {
              paths: [
                "req.headers.authorization",
                'req.headers["proxy-authorization"]',
                "req.headers.cookie",
                'req.headers["x-api-key"]',
              ],
              censor: "[redacted]",
            },
            hooks: { streamWrite: redactCredentials },
            serializers: {
              req: (req) => ({
                method: req.method,
                url: req.url,
                headers: req.headers,
                remoteAddress: req.ip,
              }),
            },
          },
  });
  app.setErrorHandler(handleError);
  // Without a log nothing is written: the decision lines are not even built.
  if (log !== false) decisions.attach(app.log);
  app.addHook("onResponse", (request, reply, done) => {
    const status = reply.statusCode;
    const path = request.routeOptions.url;
    // A decision route that answered 200 has its decision line (or its replay line); probes
    // are polled every few seconds and would drown the decisions: debug.
    const quiet =
      (status === 200 && path !== undefined && DECISION_PATHS.has(path)) ||
      (path !== undefined && PROBE_PATHS.has(path));
    // No headers: the one line per request carries nothing a client sent but its target,
    // which redactCredentials filters as the line is written. No `reqId` either: the
    // request's logger has it bound already, and a second would write the key twice.
    const line = {
      req: { method: request.method, url: request.url },
      res: { statusCode: status },
      responseTime: reply.elapsedTime,
      ...(request.principal === undefined ? {} : { actor: request.principal.actor }),
    };
    if (quiet) request.log.debug(line, "request");
    else request.log.info(line, "request");
    done();
  });
  keyLoadFailed = (error) =>
    app.log.warn(
      { identity: { reason: "keys_unavailable", issuer: verifier?.config.issuer } },
      `the issuer's keys could not be loaded: ${error instanceof Error ? error.message : "error"}`,
    );
  // Answers still being written after their replies land before the host closes the stores.
  // Writes made after their replies (answers, denial events, the A2UI gates' receipts and
  // events), written now and awaited: on close, so they land before the host closes the
  // stores, before the audit and explain routes read, and for a host or test that needs the
  // store settled.
  let gateReceipts: () => Promise<void> = () => Promise.resolve();
  const drain = async () => {
    // The A2UI gates' receipts first: a receipt given up adds its event to the writes below.
    await gateReceipts();
    await context.retry.writes.drain();
    await context.kernel.drain?.();
  };
  app.decorate("drainWrites", drain);
  app.addHook("onClose", drain);
  // Then answers the store kept refusing get up to 5 s more; those still unwritten are named
  // (their calls stay in doubt), and the kernel stops withdrawing acts whose reply was lost.
  app.addHook("onClose", async () => {
    const unwritten = await context.retry.writes.close();
    context.kernel.close?.();
    if (unwritten.length > 0) {
      app.log.warn(
        { callIds: unwritten.map((id) => id.slice(id.indexOf("\u0000") + 1)) },
        `${unwritten.length} answer(s) written after their replies could not be stored: those calls stay in doubt`,
      );
    }
  });
  // JSON only: a text body is a 415, not a string handed to a schema.
  app.removeContentTypeParser("text/plain");
  app.setNotFoundHandler((request, reply) => {
    const path = targetPath(request.url);
    if (path === undefined) {
      const problem = new HttpProblem("invalid_request", "the request target has no path");
      return reply.code(problem.status).send(problem.body());
    }
    const allowed = allowedMethods(path);
    const problem =
      allowed.length > 0
        ? new HttpProblem("method_not_allowed", `use ${allowed.join(" or ")}`, undefined, {
            allow: allowed.join(", "),
          })
        : new HttpProblem("not_found", "no such route");
    void reply.code(problem.status).headers(problem.headers).send(problem.body());
  });

  // A callback hook, not an async one: it answers within the request's own callback, so
  // Fastify attaches the body reader before the parser pushes the body. Behind a promise the
  // body was buffered in the stream and read on a later tick, and the promise itself cost
  // an allocation and a microtask per request (measured on the denied send).
  app.addHook("onRequest", (request, reply, done) => {
    rounds.enter();
    reply.header("x-request-id", request.id);
    const role = request.routeOptions.config.role;
    if (role === undefined || role === "public") return done();
    const principal = authenticate(context.principals, request.headers.authorization);
    if (principal === undefined) {
      const token = verifier && bearerToken(request.headers.authorization);
      if (verifier !== undefined && token !== undefined && looksLikeJwt(token)) {
        // Not a static principal's: the issuer's JWT. One the verifier's cache holds is
        // answered within this callback (see above); any other is verified off it.
        const admit = (found: Principal | HttpProblem) => {
          if (found instanceof HttpProblem) return done(found);
          if (found.role !== role) {
            return done(new HttpProblem("forbidden", `this route is for ${role} tokens`));
          }
          request.principal = found;
          done();
        };
        const cached = cachedJwtPrincipal(verifier, token, request.log);
        if (cached !== undefined) return admit(cached);
        void jwtPrincipal(verifier, token, request.log).then(admit, done);
        return;
      }
      reply.header("www-authenticate", 'Bearer realm="tessera"');
      return done(new HttpProblem("unauthenticated", "a known bearer token is required"));
    }
    if (principal.role !== role) {
      return done(new HttpProblem("forbidden", `this route is for ${role} tokens`));
    }
    request.principal = principal;
    done();
  });

  abandoned = (id) =>
    app.log.warn(
      { callId: id.slice(id.indexOf("\u0000") + 1) },
      "an answer handed over after the service closed could not be stored: the call stays in doubt",
    );
  const ready = readinessProbe(stores, () => context.kernel.auditState?.() === "failing");
  app.get("/healthz", { config: { role: "public" } }, async () => ({ ok: true as const }));
  app.get("/readyz", { config: { role: "public" } }, async () => {
    if (await ready()) return { ready: true as const };
    throw new HttpProblem("unavailable", "the store does not answer: decisions cannot be taken");
  });
  app.get("/metrics", { config: { role: "public" } }, async (_request, reply) => {
    void reply.type(metrics.registry.contentType);
    return metrics.registry.metrics();
  });
  const document = openApiDocument();
  app.get("/v1/openapi.json", { config: { role: "public" } }, async () => document);
  decisionRoutes(app, context);
  grantRoutes(app, context);
  deriveRoute(app, context);
  const gate = a2uiRoutes(app, context, options.a2ui);
  gateReceipts = gate.settled;
  gateTraceOf = gate.traceOf;
  return app;
}

/**
 * The host's transport, each envelope handed over with its request's trace context (the
 * decision's span, or the caller's `traceparent`): the webhook transport parents its span and
 * its `traceparent` header on it. An envelope whose request is not traced goes as it came.
 */
function tracedTransport(inner: MessageTransport, decisions: DecisionLog): MessageTransport {
  return {
    deliver: (envelope) => {
      const trace = decisions.traceOfDelivery(envelope);
      if (trace !== undefined) setDeliveryContext(envelope, trace.outgoing());
      return inner.deliver(envelope);
    },
  };
}

/**
 * The path of a request target: origin-form split by hand (`new URL("//", base)` reads `//` as
 * a host name and throws), absolute-form read as HTTP/1.1 asks; undefined when it has none.
 */
function targetPath(raw = ""): string | undefined {
  if (raw.startsWith("/")) return raw.split("?")[0];
  if (!URL.canParse(raw)) return undefined;
  const url = new URL(raw);
  return url.protocol === "http:" || url.protocol === "https:" ? url.pathname : undefined;
}

/** An incoming request ID is kept only if it is short and plain: letters, digits, `._:-`. */
function saneRequestId(value: string | string[] | undefined): string | undefined {
  return typeof value === "string" && /^[A-Za-z0-9._:-]{1,128}$/.test(value) ? value : undefined;
}

function pattern(path: string): RegExp {
  return new RegExp(`^${path.replace(/:\w+/g, "[^/]+")}$`);
}

/** The routes this app serves besides `ROUTES`: each a GET (`openApiDocument` lists neither). */
const EXTRA_GET_PATHS: ReadonlySet<string> = new Set(["/metrics", "/v1/openapi.json"]);

/**
 * The methods `path` is served with, for a 405's `Allow`: each route's, and HEAD beside every
 * GET, which Fastify answers too (`exposeHeadRoutes`).
 */
function allowedMethods(path: string): string[] {
  const methods = Object.values(ROUTES as Record<string, RouteSpec>)
    .filter((r) => pattern(r.path).test(path))
    .map((r) => r.method as string);
  if (EXTRA_GET_PATHS.has(path)) methods.push("GET");
  return methods.includes("GET") ? [...methods, "HEAD"] : methods;
}
