import { withinJsonDepth } from "../contracts/canonical-json.js";
import type { CallerCode, KernelReason } from "../contracts/vocabulary.js";
import type { DeliveryResult, MessageTransport } from "../ports/transport.js";
import type { DecisionScope } from "./decide.js";
import { isId, isOptionalId, isResourceRef, isSegment } from "./request.js";
import type { Refusal } from "./types.js";

/**
 * What both leases (the plain one and the act ledger's) decide and answer alike before and
 * after a grant is looked at: the request's shape and the lease's state, the frozen refusals,
 * and how a transport's answer is read.
 */

/** Refusals carry nothing but the code, so one frozen object per code serves every call. */
const REFUSALS = new Map<CallerCode, Refusal>();
export function refused(code: CallerCode): Refusal {
  let refusal = REFUSALS.get(code);
  if (refusal === undefined) {
    refusal = Object.freeze({ status: "denied", code });
    REFUSALS.set(code, refusal);
  }
  return refusal;
}

/** A send's parts that outlive its decision, carried to delivery. */
export interface Send {
  readonly now: number;
  readonly callId: string;
  readonly recipient: string;
  readonly payload: unknown;
  readonly label: string;
}

export type Outcome =
  | { status: "delivered"; reply?: unknown }
  | { status: "failed"; code: string; sent?: false };

/** A transport that threw (or rejected) failed the delivery; it says nothing more. */
export const THREW: Outcome = Object.freeze({ status: "failed", code: "transport_threw" });

/** A reply nested past the bound: delivered, but not a reply the kernel can hand on. */
const DEEP_REPLY: Outcome = Object.freeze({ status: "failed", code: "invalid_reply" });

/** What a transport answered, read without trusting its shape: any surprise is a throw. */
export function outcomeOf(result: DeliveryResult): Outcome {
  try {
    if (result.status === "delivered") {
      // It would overflow the stack of whatever writes it next (the claim's answer, the
      // service's response), after the act was recorded: the call would stay in doubt.
      return withinJsonDepth(result.reply) ? result : DEEP_REPLY;
    }
    const code = isId(result.code) ? result.code : "failed";
    // Only an explicit `false` says nothing left: anything else may have been sent.
    return result.sent === false
      ? { status: "failed", code, sent: false }
      : { status: "failed", code };
  } catch {
    return THREW;
  }
}

/** A refusal the lease decides before any grant is looked at (its state, the request's shape). */
export type Precheck = { readonly code: CallerCode; readonly reason: KernelReason };
const CLOSED: Precheck = { code: "turn_closed", reason: "turn_closed" };
const NO_AUTHORITY: Precheck = { code: "authority_unavailable", reason: "authority_unavailable" };
const INVALID: Precheck = { code: "invalid_request", reason: "invalid_request" };
// Not `delivery_failed`: nothing was authorized or spent, and the tool is not listed either.
const NO_TRANSPORT: Precheck = { code: "tool_unavailable", reason: "no_transport" };
// Refused whatever the grants say, so the code tells the caller nothing it did not send.
export const OTHER_OWNER: Precheck = { code: "no_matching_grant", reason: "owner_mismatch" };

/** Checks every call passes before a decision: lease state, then the request's shape. */
export function precheck(
  request: unknown,
  kind: "authorize" | "message",
  closed: boolean,
  scope: DecisionScope | undefined,
  transport: MessageTransport | undefined,
): Precheck | undefined {
  if (closed) return CLOSED;
  if (scope === undefined) return NO_AUTHORITY;
  if (typeof request !== "object" || request === null) return INVALID;
  const fields = request as Record<string, unknown>;
  if (!isOptionalId(fields.callId)) return INVALID;
  if (kind === "authorize") {
    return isId(fields.action) && isResourceRef(fields.resource) ? undefined : INVALID;
  }
  if (!isSegment(fields.recipient)) return INVALID;
  // A payload nested past the bound would overflow the stack of whatever hashes or
  // serializes it next (a transport's JSON.stringify): refused here, recorded, nothing spent.
  if (!withinJsonDepth(fields.payload)) return INVALID;
  // Refused before any use is spent: there is nowhere to deliver.
  if (transport === undefined) return NO_TRANSPORT;
  return undefined;
}
