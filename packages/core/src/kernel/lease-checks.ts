import { withinJsonDepth } from "../contracts/canonical-json.js";
import { TesseraError } from "../contracts/errors.js";
import { messageResource } from "../contracts/messages.js";
import type { CallerCode, KernelReason } from "../contracts/vocabulary.js";
import type { Clock } from "../ports/clock.js";
import type { DeliveryResult } from "../ports/transport.js";
import type { DecisionScope } from "./decide.js";
import { copyPath, isId, isSegment } from "./request.js";
import { resourceLabel } from "./resource-label.js";
import type { Refusal, ResourceRef } from "./types.js";

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

/**
 * A send as the kernel read it, once, at entry: the caller's request object is not read again
 * (a host may reuse it for its next call before this one is decided). Decided, audited and
 * delivered from this snapshot only, including when the decision is made again (STALE).
 */
export interface Send {
  readonly now: number;
  readonly callId: string;
  readonly recipient: string;
  /** The caller's payload, by reference (data only: nothing in it is read as authority). */
  readonly payload: unknown;
  readonly resource: ResourceRef;
  readonly label: string;
}

/**
 * An authorize request as the kernel read it, once, at entry; it is its own resource (its
 * `namespace`, its `path` copied segment by segment, its `owner`), so deciding on it needs no
 * second object. See `Send` for why.
 */
export interface AuthorizeCall extends ResourceRef {
  readonly now: number;
  readonly callId: string;
  readonly action: string;
  readonly label: string;
}

/**
 * Reads and checks a send's fields once; undefined when one is malformed or its read threw
 * (the call is refused `invalid_request`, with its event, nothing spent).
 */
export function readSend(
  request: unknown,
  callId: string,
  now: number,
  owner: string | undefined,
): Send | undefined {
  if (typeof request !== "object" || request === null) return undefined;
  try {
    const fields = request as Record<string, unknown>;
    const recipient = fields.recipient;
    if (!isSegment(recipient)) return undefined;
    const payload = fields.payload;
    // A payload nested past the bound would overflow the stack of whatever hashes or
    // serializes it next (a transport's JSON.stringify): refused here, recorded, nothing spent.
    // A getter or trap inside it that throws lands in the catch below, as a malformed request.
    if (!withinJsonDepth(payload)) return undefined;
    const resource = messageResource(recipient, owner);
    const label = resourceLabel(resource.namespace, resource.path);
    // Not frozen: it never leaves the lease (its fields are readonly to the compiler), and
    // freezing one object per call cost a measurable share of a decision.
    return { now, callId, recipient, payload, resource, label };
  } catch {
    return undefined;
  }
}

/** Reads and checks an authorize request's fields once; undefined as for `readSend`. */
export function readAuthorize(
  request: unknown,
  callId: string,
  now: number,
): AuthorizeCall | undefined {
  if (typeof request !== "object" || request === null) return undefined;
  try {
    const fields = request as Record<string, unknown>;
    const action = fields.action;
    if (!isId(action)) return undefined;
    const resource = fields.resource;
    if (typeof resource !== "object" || resource === null) return undefined;
    const { namespace, path, owner } = resource as Record<string, unknown>;
    if (!isId(namespace) || (owner !== undefined && !isId(owner))) return undefined;
    const copy = copyPath(path);
    if (copy === undefined) return undefined;
    const label = resourceLabel(namespace, copy);
    // One shape whether or not an owner is named; not frozen, as `readSend`'s.
    return { now, callId, action, namespace, path: copy, owner, label };
  } catch {
    return undefined;
  }
}

/**
 * A decision instant the kernel can stand on: a finite number of epoch ms inside the range a
 * `Date` holds (so its event's `at` can be written). Anything else from a `Clock` would switch
 * grant windows off (every comparison with NaN is false) or throw after a use was spent.
 */
export function isInstant(now: unknown): now is number {
  return typeof now === "number" && now >= -8.64e15 && now <= 8.64e15;
}

/** The clock's instant, checked (`isInstant`); throws `noInstant()` otherwise, or if it threw. */
export function nowOf(clock: Clock): number {
  let now: unknown;
  try {
    now = clock.now();
  } catch (cause) {
    throw noInstant(cause);
  }
  if (!isInstant(now)) throw noInstant();
  return now;
}

/**
 * The clock answered no instant. Thrown, not refused with an event: an event's `at` is made
 * from that same instant, so there is none to write; thrown before anything is read, decided
 * or spent (fails closed). `authority_unavailable`: the turn cannot tell which grants are live.
 */
export function noInstant(cause?: unknown): TesseraError {
  return new TesseraError(
    "authority_unavailable",
    "the kernel's clock answered no instant (finite epoch milliseconds): nothing was decided",
    cause === undefined ? undefined : { cause },
  );
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
export const CLOSED: Precheck = { code: "turn_closed", reason: "turn_closed" };
const NO_AUTHORITY: Precheck = { code: "authority_unavailable", reason: "authority_unavailable" };
export const INVALID: Precheck = { code: "invalid_request", reason: "invalid_request" };
// Not `delivery_failed`: nothing was authorized or spent, and the tool is not listed either.
export const NO_TRANSPORT: Precheck = { code: "tool_unavailable", reason: "no_transport" };
// Refused whatever the grants say, so the code tells the caller nothing it did not send.
export const OTHER_OWNER: Precheck = { code: "no_matching_grant", reason: "owner_mismatch" };

/**
 * The lease's state, checked before every decision (and again when one is made again): the
 * request's shape is checked on its snapshot (`readAuthorize`, `readSend`).
 */
export function precheck(closed: boolean, scope: DecisionScope | undefined): Precheck | undefined {
  if (closed) return CLOSED;
  if (scope === undefined) return NO_AUTHORITY;
  return undefined;
}
