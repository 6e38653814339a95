import type {
  AlreadyClaimed,
  AuditSink,
  ClaimKey,
  ClaimRecord,
  ClaimStore,
  Clock,
  GateReason,
  ReceiptStatus,
} from "@tessera/core";
import type { SettleTiming } from "./settle-queue.js";

/** What the gate hands to the host's callback and approval hook: the validated call. */
export interface FunctionInvocation {
  /** The trusted host session (from the host's authentication, never from the message). */
  readonly session: string;
  readonly functionCallId: string;
  readonly catalogId: string;
  readonly call: string;
  readonly args: Readonly<Record<string, unknown>>;
}

/**
 * Runs the function. Its resolved value becomes the reply's `value` (`undefined` → `null`); a
 * value JSON cannot carry (a BigInt, a cycle, a function) is a failed call (`callback_failed`).
 */
export type InvokeFunction = (invocation: FunctionInvocation) => unknown;

/** `true` approves; `false` (or `allow: false`) refuses. A throw counts as a refusal. */
export type ApprovalVerdict =
  | boolean
  | { readonly allow: boolean; readonly reason?: "policy_denied" | "approval_denied" };

export type ApproveFunction = (
  invocation: FunctionInvocation,
) => ApprovalVerdict | Promise<ApprovalVerdict>;

/** The claim a `DecideFunction` records in the same act as its decision. */
export interface CallClaim {
  readonly key: ClaimKey;
  readonly record: ClaimRecord;
}

/**
 * Claim and decision as one act (a kernel's act ledger: claim, bounded use and audit event in
 * one durable write), used instead of `claims.claim` + `approve`. It resolves:
 * - `AlreadyClaimed` when the key was taken before: nothing was decided (the gate answers the
 *   duplicate as always, with the existing claim);
 * - otherwise the verdict, the claim recorded with it. A refusal's claim must already be
 *   settled `denied` by that same act (the act ledger does this): the gate writes nothing more
 *   for it.
 * It rejects only when nothing was recorded (the ledger's all or nothing): the gate then fails
 * closed (`claim_store_unavailable`) and the ID stays free for a retry. See `kernelDecision`.
 */
export type DecideFunction = (
  claim: CallClaim,
  invocation: FunctionInvocation,
) => Promise<ApprovalVerdict | AlreadyClaimed>;

export interface FunctionCallGateOptions {
  /** Shared across every worker that may see the same session, or the guarantee is per process. */
  readonly claims: ClaimStore;
  /**
   * The A2UI v1.0 catalog definitions this host serves, each with its own `catalogId`;
   * validated on construction. A call naming any other catalog is refused before the claim.
   */
  readonly catalogs?: readonly unknown[];
  /** Shorthand for `catalogs: [catalog]`. Give exactly one of `catalog` and `catalogs`. */
  readonly catalog?: unknown;
  readonly invoke: InvokeFunction;
  /** Policy and approval, consulted after the claim and before the callback. */
  readonly approve?: ApproveFunction;
  /**
   * Claim and decision in one act, instead of `claims.claim` then `approve` (give at most one
   * of `approve` and `decide`). The store still settles the call (`claims.settle`), with the
   * reply as the claim's answer.
   */
  readonly decide?: DecideFunction;
  readonly audit?: AuditSink;
  readonly clock?: Clock;
  /** Who claims, for operators reading a claim (default `host:pid`). */
  readonly worker?: string;
  /**
   * When the receipt is written: `"after-reply"` (default; one durable write per call on the
   * critical path, the claim; call `gate.drain()` before exit) or `"before-reply"`.
   * See `SettleTiming`.
   */
  readonly settle?: SettleTiming;
}

/** The outcome of one handled message. `reason` is for the owner (audit vocabulary). */
export interface GateReceipt {
  readonly status: ReceiptStatus;
  readonly reason: GateReason;
  readonly session: string;
  /** Absent when the message carried no usable ID. */
  readonly functionCallId?: string;
  /** For a refused duplicate: what the earlier claim's receipt says (`in_doubt` if unsettled). */
  readonly previous?: ReceiptStatus;
  /**
   * For a refused duplicate: whether its body differed from the first call's. Absent when the
   * store no longer knows the first call's body (its record was lost: `bodyHash` `""`).
   */
  readonly changedBody?: boolean;
}

export interface RendererFunctionValue {
  readonly version: "v1.0";
  readonly rendererFunctionResponse: { readonly functionCallId: string; readonly value: unknown };
}
export interface RendererFunctionError {
  readonly version: "v1.0";
  readonly rendererFunctionResponse: {
    readonly functionCallId: string;
    readonly error: { readonly code: string; readonly message: string };
  };
}
export interface InvalidFunctionCallError {
  readonly version: "v1.0";
  readonly error: {
    readonly code: "INVALID_FUNCTION_CALL";
    readonly message: string;
    readonly functionCallId: string;
  };
}
/** For a message too broken to correlate: the protocol's validation error, with no surface. */
export interface UncorrelatedValidationError {
  readonly version: "v1.0";
  readonly error: {
    readonly code: "VALIDATION_FAILED";
    readonly surfaceId: "";
    readonly path: string;
    readonly message: string;
  };
}

/** Every reply is an A2UI v1.0 renderer-to-agent message. */
export type GateReply =
  | RendererFunctionValue
  | RendererFunctionError
  | InvalidFunctionCallError
  | UncorrelatedValidationError;

export interface GateResult {
  readonly reply: GateReply;
  readonly receipt: GateReceipt;
}
