import {
  type AlreadyClaimed,
  type ClaimKey,
  type ClaimRecord,
  type ClaimStore,
  type StoredClaim,
  TesseraError,
} from "@tessera/core";
import type {
  ApprovalVerdict,
  ApproveFunction,
  DecideFunction,
  FunctionInvocation,
} from "./types.js";

/**
 * How the gate's claim and decision ended, whichever way they were taken: the claim then the
 * host's `approve` (two steps), or `decide` (one act: claim and decision recorded together).
 */
export type Admission =
  | { readonly status: "approved" }
  /** Nothing was claimed: the store could not say who owns the ID. */
  | { readonly status: "unavailable"; readonly detail: string }
  | { readonly status: "duplicate"; readonly existing: StoredClaim }
  | {
      readonly status: "refused";
      readonly reason: "policy_denied" | "approval_denied";
      readonly detail?: string | undefined;
      /** The act that refused settled the claim itself (`decide`): nothing more to write. */
      readonly settled: boolean;
    };

const APPROVED: Admission = Object.freeze({ status: "approved" });

/** The claim, then `approve` (when there is one). Never throws. */
export async function claimThenApprove(
  claims: ClaimStore,
  approve: ApproveFunction | undefined,
  key: ClaimKey,
  record: ClaimRecord,
  invocation: FunctionInvocation,
): Promise<Admission> {
  let claim: Awaited<ReturnType<ClaimStore["claim"]>>;
  try {
    claim = await claims.claim(key, record);
  } catch (error) {
    return { status: "unavailable", detail: codeOf(error) };
  }
  if (claim.status !== "claimed") return { status: "duplicate", existing: claim.existing };
  if (approve === undefined) return APPROVED;
  try {
    const refused = refusalOf(await approve(invocation));
    return refused === undefined
      ? APPROVED
      : { status: "refused", reason: refused, settled: false };
  } catch {
    return {
      status: "refused",
      reason: "approval_denied",
      detail: "approval hook threw",
      settled: false,
    };
  }
}

/** Claim and decision as one act (`decide`). Never throws. */
export async function claimAndDecide(
  decide: DecideFunction,
  key: ClaimKey,
  record: ClaimRecord,
  invocation: FunctionInvocation,
): Promise<Admission> {
  let verdict: ApprovalVerdict | AlreadyClaimed;
  try {
    verdict = await decide({ key, record }, invocation);
  } catch (error) {
    // The act was not recorded (all or nothing): the ID stays free, as after a failed claim.
    return { status: "unavailable", detail: codeOf(error) };
  }
  if (isAlreadyClaimed(verdict)) return { status: "duplicate", existing: verdict.existing };
  const refused = refusalOf(verdict);
  return refused === undefined ? APPROVED : { status: "refused", reason: refused, settled: true };
}

function codeOf(error: unknown): string {
  return error instanceof TesseraError ? error.code : "error";
}

function isAlreadyClaimed(verdict: ApprovalVerdict | AlreadyClaimed): verdict is AlreadyClaimed {
  return (
    typeof verdict === "object" &&
    verdict !== null &&
    "status" in verdict &&
    verdict.status === "already_claimed"
  );
}

/** `undefined` when the verdict approves; otherwise the reason it refuses with. */
function refusalOf(verdict: ApprovalVerdict): "policy_denied" | "approval_denied" | undefined {
  if (verdict === true) return undefined;
  if (typeof verdict === "object" && verdict !== null && verdict.allow === true) return undefined;
  return typeof verdict === "object" && verdict !== null && verdict.reason === "policy_denied"
    ? "policy_denied"
    : "approval_denied";
}
