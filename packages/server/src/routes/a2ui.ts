import { AsyncLocalStorage } from "node:async_hooks";
import { randomUUID } from "node:crypto";
import {
  type ApprovalVerdict,
  type DecideFunction,
  FunctionCallGate,
  type FunctionInvocation,
  type GateResult,
  kernelDecision,
} from "@tessera/a2ui";
import type { AlreadyClaimed, AuditEvent } from "@tessera/core";
import {
  A2uiClaimRequestSchema,
  type A2uiClaimResponse,
  A2uiSettleRequestSchema,
  ROUTES,
} from "@tessera/core/http";
import { MAX_JSON_DEPTH, withinJsonDepth } from "@tessera/core/store-kit";
import type { FastifyInstance } from "fastify";
import type { ServiceContext } from "../context.js";
import { HttpProblem, parse } from "../errors.js";
import { gateSession, type Principal, principalKey, turnContext } from "../principals.js";
import {
  clientSpan,
  endClientSpan,
  errorOutcome,
  type RequestOutcome,
  RequestTrace,
  traceHeaders,
} from "../tracing.js";
import { signedPost } from "../transport/signed-post.js";
import { stampedAudit } from "./a2ui-audit.js";
import type { CallScope } from "./a2ui-scope.js";

export interface A2uiOptions {
  /** The A2UI v1.0 catalogs the host serves (see `@tessera/a2ui`). */
  readonly catalogs: readonly unknown[];
  /**
   * One-step mode (`POST /v1/a2ui/call`): the service POSTs each approved call to this URL,
   * signed like a webhook, and answers `{ value }` from its JSON body. Absent: 404.
   */
  readonly functionEndpoint?: { readonly url: string; readonly secret: string };
  /** A dispatch handle not settled within this many ms fails its call (default 300 000). */
  readonly settleTimeoutMs?: number;
  /** One-step: how long the function endpoint may take (default 10 000 ms). */
  readonly callTimeoutMs?: number;
}

interface Pending {
  readonly principal: string;
  readonly result: Promise<GateResult>;
  settle(outcome: { value: unknown } | { error: Error }): void;
}

/**
 * The A2UI gate for hosts whose functions run elsewhere. `claim` runs the gate up to the
 * dispatch (validate, catalog, then one act: the exclusive claim in the shared store and the
 * kernel's decision on `a2ui.call` for that catalog function, recorded together) and either answers
 * the refusal reply or hands out a dispatch handle; `settle` gives the function's value or error
 * and answers the reply to send. The gate's own rules hold: a call ID is claimed once per
 * session across every instance sharing the store; a retry gets `INVALID_FUNCTION_CALL`.
 * Handles live in the instance that issued them: an instance that stops leaves its open
 * calls in doubt, never re-dispatched.
 *
 * What a call costs before its reply: the act, one durable write (claim, bounded use, the
 * kernel's event; a refusal's claim settled `denied` in it). The gate's own events and the
 * receipt (with the reply as the claim's answer) are written after the reply, in write windows.
 * Returns what writes the receipts waiting after replies now (for `app.drainWrites()`), and
 * the traced request whose call records a kernel act (for its `tessera.store.write` span).
 */
export function a2uiRoutes(
  app: FastifyInstance,
  context: ServiceContext,
  options?: A2uiOptions,
): GateRoutes {
  const route = (name: "a2uiClaim" | "a2uiSettle" | "a2uiCall") => ({
    method: ROUTES[name].method,
    url: ROUTES[name].path,
    config: { role: ROUTES[name].role },
  });
  const unconfigured = () => {
    throw new HttpProblem("not_found", "this service has no A2UI catalog configured");
  };
  if (options === undefined) {
    app.route({ ...route("a2uiClaim"), handler: unconfigured });
    app.route({ ...route("a2uiSettle"), handler: unconfigured });
    app.route({ ...route("a2uiCall"), handler: unconfigured });
    return { settled: async () => undefined, traceOf: () => undefined };
  }
  const { stores, metrics } = context;
  const calls = new AsyncLocalStorage<CallScope>();
  const decided = {
    decide: tracedDecision(decision(context, calls), calls),
    audit: stampedAudit(context, calls),
  };
  // The kernel's act of a call is recorded inside its request (the gate's own events are
  // written after the reply, source "gate": no span).
  const traceOf = (event: AuditEvent) =>
    event.source === "kernel" ? calls.getStore()?.trace : undefined;
  const twoStep = new FunctionCallGate({
    claims: stores.claims,
    catalogs: options.catalogs,
    ...decided,
    invoke: (invocation) => {
      const dispatch = calls.getStore()?.dispatch;
      if (dispatch === undefined) throw new Error("dispatched outside a claim request");
      return dispatch(invocation);
    },
  });
  const pending = new Map<string, Pending>();
  const settleTimeoutMs = options.settleTimeoutMs ?? 300_000;
  const count = (result: GateResult) =>
    metrics.claims.inc({ route: "a2ui", status: result.receipt.status });

  app.route({
    ...route("a2uiClaim"),
    handler: async (request): Promise<A2uiClaimResponse> => {
      const { message } = parse(A2uiClaimRequestSchema, request.body, "body");
      const principal = request.principal;
      if (principal === undefined) throw new Error("route served without authentication");
      const trace = new RequestTrace("a2ui.claim", request.headers);
      try {
        const answer = await claimCall(principal, trace, message);
        trace.end(answer.callId, answer.ended);
        return answer.response;
      } catch (error) {
        trace.end(undefined, errorOutcome(error));
        throw error;
      }
    },
  });

  /** Two-step mode: the gate up to the dispatch, or its refusal. */
  const claimCall = async (
    principal: Principal,
    trace: RequestTrace,
    message: unknown,
  ): Promise<{ response: A2uiClaimResponse; callId?: string; ended: RequestOutcome }> => {
    let onDispatch!: (call: FunctionInvocation) => void;
    const dispatched = new Promise<FunctionInvocation>((resolve) => {
      onDispatch = resolve;
    });
    const handle = randomUUID();
    const dispatch = (invocation: FunctionInvocation) =>
      new Promise<unknown>((resolve, reject) => {
        const timer = setTimeout(() => {
          pending.delete(handle);
          reject(new Error("the call was not settled in time"));
        }, settleTimeoutMs);
        timer.unref();
        pending.set(handle, {
          principal: principalKey(principal),
          result,
          settle: (outcome) => {
            clearTimeout(timer);
            pending.delete(handle);
            if ("error" in outcome) reject(outcome.error);
            else resolve(outcome.value);
          },
        });
        onDispatch(invocation);
      });
    const result = calls.run({ principal, dispatch, trace }, () =>
      twoStep.handle(gateSession(principal), message),
    );
    void result.then(count, () => undefined);
    const first = await Promise.race([result, dispatched.then((call) => ({ call }))]);
    if ("reply" in first) {
      return {
        response: { status: "refused", reply: { ...first.reply }, receipt: first.receipt.status },
        ...receiptOutcome(first),
      };
    }
    const { functionCallId, catalogId, call, args } = first.call;
    return {
      response: { status: "dispatch", handle, call: { functionCallId, catalogId, call, args } },
      callId: functionCallId,
      ended: { outcome: "dispatch", status: 200 },
    };
  };

  app.route({
    ...route("a2uiSettle"),
    handler: async (request) => {
      const body = parse(A2uiSettleRequestSchema, request.body, "body");
      // Bounded as every other value a call carries (args, a webhook's or the function
      // endpoint's reply): settled, one nested past 64 levels was recorded as the call's answer
      // and then overflowed the stack writing the reply, a 500 whose reply was lost for good
      // (the handle spent). Refused first, the handle stays open for a settle that fits.
      if ("value" in body && !withinJsonDepth(body.value)) {
        throw new HttpProblem(
          "invalid_request",
          `value: nests deeper than ${MAX_JSON_DEPTH} levels`,
          "value",
        );
      }
      const open = pending.get(body.handle);
      // Another principal's handle answers like one that never existed.
      if (
        open === undefined ||
        request.principal === undefined ||
        open.principal !== principalKey(request.principal)
      ) {
        throw new HttpProblem("not_found", "no open dispatch has this handle", "handle");
      }
      open.settle(
        "error" in body ? { error: new Error(body.error.message) } : { value: body.value },
      );
      const { reply, receipt } = await open.result;
      return { reply: { ...reply }, receipt: receipt.status };
    },
  });

  app.addHook("onClose", async () => {
    for (const open of pending.values()) open.settle({ error: new Error("the service stopped") });
    // Receipts and events written after their replies land before the host closes the stores.
    await twoStep.drain();
    await context.retry.writes.drain();
  });

  const endpoint = options.functionEndpoint;
  if (endpoint === undefined) {
    app.route({ ...route("a2uiCall"), handler: unconfigured });
    return { settled: () => twoStep.settled(), traceOf };
  }
  const oneStep = new FunctionCallGate({
    claims: stores.claims,
    catalogs: options.catalogs,
    ...decided,
    invoke: async ({ functionCallId, catalogId, call, args }) => {
      // The call's trace continues at the function endpoint, as a webhook's does.
      const trace = calls.getStore()?.trace;
      const { span, traceparent, tracestate } =
        trace === undefined
          ? { span: undefined, traceparent: undefined, tracestate: undefined }
          : clientSpan(
              "tessera.a2ui.function",
              auditTrace(trace, functionCallId),
              trace.outgoing(),
            );
      const answer = await signedPost(
        endpoint,
        { functionCallId, catalogId, call, args },
        {
          timeoutMs: options.callTimeoutMs ?? 10_000,
          ...(traceparent === undefined ? {} : { headers: traceHeaders(traceparent, tracestate) }),
        },
      );
      endClientSpan(span, answer.status === "ok" ? { status: "delivered" } : answer);
      if (answer.status !== "ok") throw new Error(`the function endpoint failed: ${answer.code}`);
      return (answer.body as { value?: unknown } | undefined)?.value;
    },
  });
  app.route({
    ...route("a2uiCall"),
    handler: async (request) => {
      const { message } = parse(A2uiClaimRequestSchema, request.body, "body");
      const principal = request.principal;
      if (principal === undefined) throw new Error("route served without authentication");
      const trace = new RequestTrace("a2ui.call", request.headers);
      let result: GateResult;
      try {
        result = await calls.run({ principal, trace }, () =>
          oneStep.handle(gateSession(principal), message),
        );
      } catch (error) {
        trace.end(undefined, errorOutcome(error));
        throw error;
      }
      const { callId, ended } = receiptOutcome(result);
      trace.end(callId, ended);
      count(result);
      return { reply: { ...result.reply }, receipt: result.receipt.status };
    },
  });
  app.addHook("onClose", async () => {
    await oneStep.drain();
    await context.retry.writes.drain();
  });
  return {
    settled: async () => {
      await Promise.all([twoStep.settled(), oneStep.settled()]);
    },
    traceOf,
  };
}

export interface GateRoutes {
  /** Writes the receipts waiting after their replies now. */
  readonly settled: () => Promise<void>;
  /** The traced A2UI request whose kernel act `event` is, while it is recorded. */
  readonly traceOf: (event: AuditEvent) => RequestTrace | undefined;
}

/** The gate's decision inside the request's `tessera.decide` span, when it is traced. */
function tracedDecision(
  decide: DecideFunction,
  calls: AsyncLocalStorage<CallScope>,
): DecideFunction {
  return (claim, invocation) => {
    const trace = calls.getStore()?.trace;
    return trace?.recording
      ? trace.decide(invocation.functionCallId, () => decide(claim, invocation), verdictOf)
      : decide(claim, invocation);
  };
}

function verdictOf(verdict: ApprovalVerdict | AlreadyClaimed): { readonly status: string } {
  if (typeof verdict === "object" && "status" in verdict) return { status: verdict.status };
  const allowed = typeof verdict === "boolean" ? verdict : verdict.allow;
  return { status: allowed ? "allowed" : "denied" };
}

/**
 * The gate's claim and decision as one act of the kernel for the call's principal
 * (`kernelDecision`): the claim, `a2ui.call` on that catalog function with a bounded grant's use,
 * and the kernel's audit event, in one write of the act ledger; a refusal is the gate's `denied`,
 * its claim settled in that write. The turn's trace is the caller's (`traceparent`), else the
 * call ID, as the gate's own events have it (stamped alike), so `?traceId=` finds both.
 */
function decision(context: ServiceContext, calls: AsyncLocalStorage<CallScope>) {
  return kernelDecision(
    context.kernel,
    (invocation) => {
      const scope = calls.getStore();
      // Fail closed: a call that reached the gate outside a request has nobody to decide for.
      return scope === undefined
        ? undefined
        : turnContext(scope.principal, auditTrace(scope.trace, invocation.functionCallId));
    },
    (answer) =>
      context.metrics.decided("a2ui", answer.status, answer.status === "denied" ? answer.code : ""),
  );
}

/** A call's audit trace: the caller's (or the host's tracer's) when there is one, else its ID. */
function auditTrace(trace: RequestTrace, functionCallId: string): string {
  return trace.joined ? trace.traceId : functionCallId;
}

/** What a gate result says on the request's span: the receipt, and the reason of a refusal. */
function receiptOutcome(result: GateResult): { callId?: string; ended: RequestOutcome } {
  const { status, reason, functionCallId } = result.receipt;
  return {
    ...(functionCallId === undefined ? {} : { callId: functionCallId }),
    ended: { outcome: status, ...(status === "dispatched" ? {} : { code: reason }), status: 200 },
  };
}
