import {
  A2UI_CALL_ACTION,
  type AccessContext,
  type AuthorizeRequest,
  type AuthorizeResult,
  a2uiFunctionResource,
  type Kernel,
  TesseraError,
} from "@tessera/core";
import type {
  ApprovalVerdict,
  ApproveFunction,
  DecideFunction,
  FunctionInvocation,
} from "./types.js";

/** Whose authority decides a call: the trusted identity behind its host session. */
type ContextOf = (
  invocation: FunctionInvocation,
) => AccessContext | undefined | Promise<AccessContext | undefined>;

/**
 * The gate's approval step as a kernel decision, so an A2UI function call is an act like any
 * other: after the claim and before the callback, one turn opened with `contextOf(invocation)`
 * (the trusted identity of whoever the host session acts for, never the message's) authorizes
 * `a2ui.call` on `a2ui:/<catalogId>/<function>` under the call's ID. A bounded grant's use is
 * consumed atomically in the kernel's usage store, and the kernel writes its own audit event,
 * whose reason (`no_capability`, `grant_exhausted`, …) tells the owner why. A refusal is the
 * gate's `policy_denied`: receipt `denied`, `EXECUTION_FAILED`, nothing runs. `contextOf`
 * answering `undefined` refuses too (nobody to decide for), and so does a throw (the gate's
 * rule for a hook that throws). `onDecision` sees each kernel answer, for a host's metrics; a
 * throw from it is ignored (the decision stands).
 *
 *     new FunctionCallGate({ claims, catalogs, invoke,
 *       approve: kernelApproval(kernel, (call) => contextOfSession(call.session)) })
 */
export function kernelApproval(
  kernel: Kernel,
  contextOf: ContextOf,
  onDecision?: (answer: AuthorizeResult) => void,
): ApproveFunction {
  return async (invocation): Promise<ApprovalVerdict> => {
    const ctx = await contextOf(invocation);
    if (ctx === undefined) return REFUSED;
    const turn = await kernel.openTurnAuthority(ctx);
    try {
      const answer = await turn.authorize(callRequest(invocation));
      report(onDecision, answer);
      return answer.status === "allowed" ? true : REFUSED;
    } finally {
      await turn.close();
    }
  };
}

const REFUSED: ApprovalVerdict = Object.freeze({ allow: false, reason: "policy_denied" });

/**
 * The same kernel decision as `kernelApproval`, made in ONE act with the gate's claim: the
 * gate's `decide` option. The turn's `authorize(request, { claim })` records the claim, the
 * bounded use and the kernel's audit event in one transaction of the kernel's act ledger
 * (`createKernel({ acts })`; a kernel without one rejects, and the gate fails closed with
 * nothing claimed). A key claimed before comes back as `AlreadyClaimed`: nothing decided or
 * spent, the gate answers the duplicate. A refusal's claim is settled `denied` in that same
 * write. `contextOf` answering `undefined` rejects (nobody to decide for, nothing claimed: the
 * gate answers `claim_store_unavailable` and the ID stays free).
 *
 *     new FunctionCallGate({ claims, catalogs, invoke,
 *       decide: kernelDecision(kernel, (call) => contextOfSession(call.session)) })
 */
export function kernelDecision(
  kernel: Kernel,
  contextOf: ContextOf,
  onDecision?: (answer: AuthorizeResult) => void,
): DecideFunction {
  return async (claim, invocation) => {
    const ctx = await contextOf(invocation);
    if (ctx === undefined) {
      throw new TesseraError("invalid_input", "no trusted identity acts for this session");
    }
    const turn = await kernel.openTurnAuthority(ctx);
    try {
      const answer = await turn.authorize(callRequest(invocation), { claim });
      if (answer.status === "already_claimed") return answer;
      // The act is recorded from here on: nothing after this line may reject, or the gate
      // would answer "not claimed" for a claim that holds its ID and a use that was spent.
      report(onDecision, answer);
      return answer.status === "allowed" ? true : REFUSED;
    } finally {
      await turn.close();
    }
  };
}

/**
 * Hands the kernel's answer to the host's `onDecision` (metrics). A hook that throws (or
 * rejects) changes nothing: the decision is already made and recorded (a bounded use spent,
 * an act written), so its throw must not turn an allowed call into a refusal, nor a recorded
 * act into one the gate believes was never recorded (which left its ID in doubt, blocked,
 * with nothing run).
 */
function report(
  onDecision: ((answer: AuthorizeResult) => void) | undefined,
  answer: AuthorizeResult,
): void {
  if (onDecision === undefined) return;
  try {
    // An async hook's rejection would otherwise be unhandled (and end a Node process).
    const returned: unknown = onDecision(answer);
    if (returned instanceof Promise) returned.catch(() => undefined);
  } catch {
    // The hook is the host's; the decision stands.
  }
}

/** `a2ui.call` on the catalog function, under the call's own ID. */
function callRequest(invocation: FunctionInvocation): AuthorizeRequest {
  return {
    action: A2UI_CALL_ACTION,
    resource: a2uiFunctionResource(invocation.catalogId, invocation.call),
    callId: invocation.functionCallId,
  };
}
