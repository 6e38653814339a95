import {
  A2UI_CALL_ACTION,
  type AccessContext,
  type AuthorizeResult,
  a2uiFunctionResource,
  type Kernel,
} from "@tessera/core";
import type { ApprovalVerdict, ApproveFunction, FunctionInvocation } from "./types.js";

/**
 * The gate's approval step as a kernel decision, so an A2UI function call is an act like any
 * other: after the claim and before the callback, one turn opened with `contextOf(invocation)`
 * (the trusted identity of whoever the host session acts for, never the message's) authorizes
 * `a2ui.call` on `a2ui:/<catalogId>/<function>` under the call's ID. A bounded grant's use is
 * consumed atomically in the kernel's usage store, and the kernel writes its own audit event,
 * whose reason (`no_capability`, `grant_exhausted`, …) tells the owner why. A refusal is the
 * gate's `policy_denied`: receipt `denied`, `EXECUTION_FAILED`, nothing runs. `contextOf`
 * answering `undefined` refuses too (nobody to decide for), and so does a throw (the gate's
 * rule for a hook that throws). `onDecision` sees each kernel answer, for a host's metrics.
 *
 *     new FunctionCallGate({ claims, catalogs, invoke,
 *       approve: kernelApproval(kernel, (call) => contextOfSession(call.session)) })
 */
export function kernelApproval(
  kernel: Kernel,
  contextOf: (
    invocation: FunctionInvocation,
  ) => AccessContext | undefined | Promise<AccessContext | undefined>,
  onDecision?: (answer: AuthorizeResult) => void,
): ApproveFunction {
  return async (invocation): Promise<ApprovalVerdict> => {
    const ctx = await contextOf(invocation);
    if (ctx === undefined) return REFUSED;
    const turn = await kernel.openTurnAuthority(ctx);
    try {
      const answer = await turn.authorize({
        action: A2UI_CALL_ACTION,
        resource: a2uiFunctionResource(invocation.catalogId, invocation.call),
        callId: invocation.functionCallId,
      });
      onDecision?.(answer);
      return answer.status === "allowed" ? true : REFUSED;
    } finally {
      await turn.close();
    }
  };
}

const REFUSED: ApprovalVerdict = Object.freeze({ allow: false, reason: "policy_denied" });
