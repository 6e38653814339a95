import type { FunctionInvocation } from "@tessera/a2ui";
import type { Principal } from "../principals.js";
import type { RequestTrace } from "../tracing.js";

/**
 * What one gate call runs under. The gates are shared by every principal, and the gate hands
 * its hooks only the call, so the principal travels beside it: the approval decides for it,
 * and every event the gate writes for the call is stamped with it.
 */
export interface CallScope {
  readonly principal: Principal;
  /** The request's trace: its ID is the call's audit trace when the caller gave one. */
  readonly trace: RequestTrace;
  /** Two-step mode: hands the approved call to the claim request that waits for it. */
  readonly dispatch?: (invocation: FunctionInvocation) => Promise<unknown>;
}
