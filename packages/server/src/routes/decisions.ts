import {
  type AlreadyClaimed,
  type AuditFilter,
  type ClaimStore,
  decidedBy,
  explain,
  type TurnAuthority,
} from "@tessera/core";
import {
  AuditQuerySchema,
  AuthorizeRequestSchema,
  type AuthorizeResponse,
  ExplainQuerySchema,
  type InDoubtClaimsResponse,
  newCallId,
  ROUTES,
  SendMessageRequestSchema,
  type SendMessageResponse,
} from "@tessera/core/http";
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { ServiceContext } from "../context.js";
import { HttpProblem, parse } from "../errors.js";
import {
  explainPrincipal,
  gateSession,
  type Principal,
  principalKey,
  turnContext,
} from "../principals.js";
import { type CallClaim, once, retrySession, type Settled } from "../retry.js";
import { errorOutcome, RequestTrace } from "../tracing.js";

/**
 * The kernel's routes. Each decision is one turn: a lease opened for the authenticated
 * principal (purpose included: it is the principal's, never the body's), one decision, the
 * lease closed. A refusal is a 200 with `status: "denied"`.
 */
export function decisionRoutes(app: FastifyInstance, context: ServiceContext): void {
  const { metrics } = context;
  const route = (name: keyof typeof ROUTES) => ({
    method: ROUTES[name].method,
    url: ROUTES[name].path,
    config: { role: ROUTES[name].role },
  });

  app.route({
    ...route("tools"),
    handler: async (request) =>
      withTurn(openTurn(context, principalOf(request)), async (turn) => ({
        tools: [...(await turn.listTools())],
      })),
  });

  app.route({
    ...route("authorize"),
    handler: async (request) => {
      const body = parse(AuthorizeRequestSchema, request.body, "body");
      const principal = principalOf(request);
      const decide = async (opened: Promise<TurnAuthority>, callId: string, claim?: CallClaim) => {
        const request = Object.assign({}, body, { callId });
        const result = await withTurn(opened, (turn) =>
          claim === undefined ? turn.authorize(request) : turn.authorize(request, { claim }),
        );
        if (result.status === "already_claimed") return result;
        const answer: AuthorizeResponse = result;
        metrics.decided("authorize", answer.status, answer.status === "denied" ? answer.code : "");
        const settled: Settled = answer.status === "allowed" ? "dispatched" : "denied";
        return { answer, settled };
      };
      return retrySafe(context, "authorize", request, principal, body.callId, body, decide);
    },
  });

  app.route({
    ...route("sendMessage"),
    handler: async (request) => {
      const body = parse(SendMessageRequestSchema, request.body, "body");
      const principal = principalOf(request);
      const decide = async (opened: Promise<TurnAuthority>, id: string, claim?: CallClaim) => {
        const request = { recipient: body.recipient, payload: body.payload, callId: id };
        const result = await withTurn(opened, (turn) =>
          claim === undefined ? turn.sendMessage(request) : turn.sendMessage(request, { claim }),
        );
        if (result.status === "already_claimed") return result;
        const answer: SendMessageResponse =
          result.status === "delivered"
            ? {
                status: "delivered",
                messageId: result.messageId,
                grantId: result.grantId,
                callId: id,
                ...(result.reply === undefined ? {} : { reply: result.reply }),
              }
            : { status: "denied", code: result.code };
        metrics.decided("send", answer.status, answer.status === "denied" ? answer.code : "");
        const settled: Settled =
          answer.status === "delivered"
            ? "dispatched"
            : answer.code === "delivery_failed"
              ? "failed"
              : "denied";
        return { answer, settled };
      };
      return retrySafe(context, "send", request, principal, body.callId, body, decide);
    },
  });

  app.route({
    ...route("explain"),
    handler: async (request) => {
      const { callId } = parse(ExplainQuerySchema, request.query, "query");
      // Read your own writes: what waits after earlier replies (denial and gate events) lands first.
      await app.drainWrites();
      // Scoped to the whole principal: another principal's call ID reads exactly like an ID
      // nobody used (verdict unknown), so the answer tells nothing about anyone else.
      // Capped as the audit query is: every principal's events under the ID are read.
      const capped = {
        read: (filter: AuditFilter = {}) =>
          context.stores.audit.read({ ...filter, limit: AUDIT_READ_CAP }),
      };
      const e = await explain(capped, callId, explainPrincipal(principalOf(request)));
      return { callId, verdict: e.verdict, code: e.code, summary: e.summary };
    },
  });

  app.route({
    ...route("audit"),
    handler: async (request) => {
      const query = parse(AuditQuerySchema, request.query, "query");
      if ((query.callId === undefined) === (query.traceId === undefined)) {
        throw new HttpProblem("invalid_request", "give exactly one of callId or traceId", "callId");
      }
      const mine = explainPrincipal(principalOf(request));
      await app.drainWrites();
      const events = await context.stores.audit.read({
        ...(query.callId === undefined ? {} : { callId: query.callId }),
        ...(query.traceId === undefined ? {} : { traceId: query.traceId }),
        limit: AUDIT_READ_CAP,
      });
      // Only the principal's own decisions: a foreign ID reads like an unused one (no events).
      const own = events.filter((event) => decidedBy(event, mine));
      return { events: own.slice(0, query.limit ?? 100) };
    },
  });

  // Listings in progress, by the sessions they read. On Redis a listing walks the keyspace
  // (SCAN: seconds on a server of millions of keys), so a principal's concurrent requests share
  // the one in progress rather than each starting its own walk of the shared server.
  const listings = new Map<string, Promise<InDoubtClaimsResponse>>();
  app.route({
    ...route("inDoubtClaims"),
    handler: (request) => {
      const principal = principalOf(request);
      // The gate's calls and the retry-safe sends and authorizations a stopped instance left
      // between claim and answer: both are call IDs that will never be decided again.
      const sessions = [gateSession(principal), retrySession(principalKey(principal))] as const;
      const key = sessions.join("\u0000");
      let listing = listings.get(key);
      if (listing === undefined) {
        listing = listInDoubt(context.stores.claims, sessions).finally(() => listings.delete(key));
        listings.set(key, listing);
      }
      return listing;
    },
  });
}

/**
 * The most events one `GET /v1/audit` or `/v1/explain` reads from the store. A caller names its
 * own trace IDs (`traceparent`), and repeats a call ID as often as it likes (each A2UI duplicate
 * is an event), so one ID can hold millions of decisions, every principal's counted: read whole,
 * each query of it held them all in memory (about 1.7 KB an event), and a few at once could
 * exhaust the service. The oldest are read: the decisions that came first, whatever followed.
 */
export const AUDIT_READ_CAP = 10_000;

export function principalOf(request: FastifyRequest): Principal {
  if (request.principal === undefined) throw new Error("route served without authentication");
  return request.principal;
}

/** A decision's answer as the routes give it: its status, and a refusal's code. */
interface Answer {
  readonly status: string;
  readonly code?: string;
}

/**
 * Decides the call `decide` makes for one route. `decide` gets the call ID to decide (the
 * body's, or a fresh one: known before the kernel runs, so the decision's log line and spans
 * find their request by it) and, when the body carried one, the claim to record with it.
 */
type Decide<A> = (
  turn: Promise<TurnAuthority>,
  callId: string,
  claim?: CallClaim,
) => Promise<{ answer: A; settled: Settled } | AlreadyClaimed>;

/** What a decision's span says: its answer, or that another request holds its call ID. */
function answerOf(decided: { answer: Answer } | AlreadyClaimed): Answer {
  return "answer" in decided ? decided.answer : { status: decided.status };
}

async function retrySafe<A extends Answer>(
  context: ServiceContext,
  route: "send" | "authorize",
  request: FastifyRequest,
  principal: Principal,
  callId: string | undefined,
  body: unknown,
  decide: Decide<A>,
): Promise<A> {
  // The caller's trace (a valid `traceparent`), else a new one: the audit event carries it.
  const trace = new RequestTrace(route, request.headers);
  // Time-ordered (core's `newCallId`): stores index events by call ID.
  const id = callId ?? newCallId();
  // The decision's log line waits for its answer (latency) and its event, see decision-log.ts.
  const open = context.decisions.begin(trace.traceId, request.id, id, principal, trace);
  const deciding: Decide<A> = (turn, callId, claim) => {
    open.deciding = true;
    // Not traced (no SDK): no span, and no closure for one.
    return trace.recording
      ? trace.decide(callId, () => decide(turn, callId, claim), answerOf)
      : decide(turn, callId, claim);
  };
  try {
    const { answer, replayed } = await decideOnce(
      context,
      route,
      request.id,
      trace.traceId,
      principal,
      callId,
      id,
      body,
      deciding,
    );
    trace.end(callId, {
      outcome: replayed ? "replayed" : answer.status,
      code: answer.code,
      status: 200,
    });
    return answer;
  } catch (error) {
    trace.end(callId, errorOutcome(error));
    throw error;
  } finally {
    context.decisions.answered(open);
  }
}

async function decideOnce<A>(
  context: ServiceContext,
  route: string,
  reqId: string,
  traceId: string,
  principal: Principal,
  callId: string | undefined,
  id: string,
  body: unknown,
  decide: Decide<A>,
): Promise<{ answer: A; replayed: boolean }> {
  const turn = openTurn(context, principal, traceId);
  if (callId === undefined) {
    const decided = await decide(turn, id);
    if ("existing" in decided) throw new Error("a decision without a claim collided");
    return { answer: decided.answer, replayed: false };
  }
  // The claim is recorded with the decision, in the act's one write: see `once`.
  const result = await once(
    context.stores.claims,
    principalKey(principal),
    callId,
    { route, body },
    (claim) => decide(turn, callId, claim),
    context.retry,
  );
  context.metrics.claims.inc({
    route,
    status: result.replayed ? "none" : (result.settled ?? "none"),
  });
  if (result.replayed) {
    const { namespaceId, actor, authority, owner } = principal;
    context.decisions.replayed({
      reqId,
      callId,
      route,
      principal: { namespaceId, actor, authority, ...(owner === undefined ? {} : { owner }) },
    });
  }
  return { answer: result.answer, replayed: result.replayed };
}

function openTurn(
  context: ServiceContext,
  principal: Principal,
  traceId: string = newCallId(),
): Promise<TurnAuthority> {
  const opened = context.kernel.openTurnAuthority(turnContext(principal, traceId));
  // Awaited only once the claim is won: a failure meanwhile must not read as unhandled.
  opened.catch(noop);
  return opened;
}

function noop(): void {}

async function withTurn<T>(
  opened: Promise<TurnAuthority>,
  use: (turn: TurnAuthority) => Promise<T>,
): Promise<T> {
  const turn = await opened;
  try {
    return await use(turn);
  } finally {
    await turn.close();
  }
}

async function listInDoubt(
  claims: ClaimStore,
  sessions: readonly [string, string],
): Promise<InDoubtClaimsResponse> {
  const [gate, service] = await Promise.all(sessions.map((session) => claims.listInDoubt(session)));
  const listed = [...(gate ?? []), ...(service ?? [])].sort((a, b) => a.claimedAt - b.claimedAt);
  return {
    claims: listed.map((c) => ({
      functionCallId: c.functionCallId,
      claimedAt: c.claimedAt,
      ...(c.worker === undefined ? {} : { worker: c.worker }),
    })),
  };
}
