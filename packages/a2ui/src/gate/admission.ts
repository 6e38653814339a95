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
  // A store of the host's own may answer anything: what is neither shape fails closed, as a
  // store that did not answer (nothing runs), not as a TypeError out of `handle`.
  if (!isClaimResult(claim)) return MALFORMED_CLAIM;
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
  if (isAlreadyClaimed(verdict)) {
    if (!isStoredClaim(verdict.existing)) return MALFORMED_CLAIM;
    return { status: "duplicate", existing: verdict.existing };
  }
  const refused = refusalOf(verdict);
  return refused === undefined ? APPROVED : { status: "refused", reason: refused, settled: true };
}

const MALFORMED_CLAIM: Admission = Object.freeze({
  status: "unavailable",
  detail: "claim_store_unavailable: the claim store answered neither claimed nor a stored claim",
});

/** `claimed`, or `already_claimed` with the stored claim: the two answers a claim store gives. */
function isClaimResult(claim: unknown): claim is Awaited<ReturnType<ClaimStore["claim"]>> {
  if (typeof claim !== "object" || claim === null) return false;
  const status = (claim as { status?: unknown }).status;
  if (status === "claimed") return true;
  return status === "already_claimed" && isStoredClaim((claim as { existing?: unknown }).existing);
}

/** What the gate reads of a stored claim: its body hash, and its receipt when there is one. */
function isStoredClaim(existing: unknown): boolean {
  if (typeof existing !== "object" || existing === null) return false;
  const { bodyHash, receipt } = existing as { bodyHash?: unknown; receipt?: unknown };
  if (typeof bodyHash !== "string") return false;
  return (
    receipt === undefined ||
    (typeof receipt === "object" &&
      receipt !== null &&
      typeof (receipt as { status?: unknown }).status === "string")
  );
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
