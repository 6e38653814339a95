import type { CallerCode, GateReason } from "@tessera/core";
import type {
  GateReply,
  InvalidFunctionCallError,
  RendererFunctionError,
  RendererFunctionValue,
  UncorrelatedValidationError,
} from "./types.js";

/**
 * Builders for the gate's A2UI v1.0 replies. Messages are fixed text per reason: nothing
 * from the message (IDs, names, args) is echoed, apart from the `functionCallId` field the
 * protocol requires for correlation.
 */

const VERSION = "v1.0" as const;

export function valueReply(functionCallId: string, value: unknown): RendererFunctionValue {
  return Object.freeze({
    version: VERSION,
    rendererFunctionResponse: Object.freeze({ functionCallId, value: value ?? null }),
  });
}

export function executionError(functionCallId: string, message: string): RendererFunctionError {
  return Object.freeze({
    version: VERSION,
    rendererFunctionResponse: Object.freeze({
      functionCallId,
      error: Object.freeze({ code: "EXECUTION_FAILED", message }),
    }),
  });
}

/** A malformed message whose ID could still be read: answered on that ID. */
export function correlatedValidationError(
  functionCallId: string,
  message: string,
): RendererFunctionError {
  return Object.freeze({
    version: VERSION,
    rendererFunctionResponse: Object.freeze({
      functionCallId,
      error: Object.freeze({ code: "VALIDATION_FAILED", message }),
    }),
  });
}

/**
 * A message with no usable ID. The v1.0 `VALIDATION_FAILED` error requires a `surfaceId`;
 * a function call has none, so it is the empty string, and `path` points at the bad field.
 */
export function uncorrelatedValidationError(
  path: string,
  message: string,
): UncorrelatedValidationError {
  return Object.freeze({
    version: VERSION,
    error: Object.freeze({ code: "VALIDATION_FAILED", surfaceId: "", path, message }),
  });
}

export function invalidFunctionCall(
  functionCallId: string,
  message: string,
): InvalidFunctionCallError {
  return Object.freeze({
    version: VERSION,
    error: Object.freeze({ code: "INVALID_FUNCTION_CALL", message, functionCallId }),
  });
}

/** The gate's refusals after the message was read: every gate reason but a run and a bad message. */
export type GateRefusal = Exclude<GateReason, "dispatched" | "invalid_message">;

/**
 * Caller-facing text and A2UI error code per refusal; the owner learns the precise reason from
 * audit. Total over `GateRefusal`: a new gate reason does not compile until it has its text and
 * its code here, instead of falling back to a generic answer.
 */
const REFUSALS: Record<
  GateRefusal,
  { readonly code: "INVALID_FUNCTION_CALL" | "EXECUTION_FAILED"; readonly text: string }
> = {
  unknown_catalog: {
    code: "INVALID_FUNCTION_CALL",
    text: "The call names a catalog this host does not serve.",
  },
  unknown_function: {
    code: "INVALID_FUNCTION_CALL",
    text: "The function is not declared in the catalog.",
  },
  caller_not_allowed: {
    code: "INVALID_FUNCTION_CALL",
    text: "The function may not be called by an agent.",
  },
  user_activation_required: {
    code: "INVALID_FUNCTION_CALL",
    text: "The function requires a user activation and cannot be called by an agent.",
  },
  invalid_args: {
    code: "INVALID_FUNCTION_CALL",
    text: "The arguments do not match the function's schema in the catalog.",
  },
  duplicate_call: {
    code: "INVALID_FUNCTION_CALL",
    text: "This functionCallId was already used in this session; a new attempt needs a new ID.",
  },
  claim_store_unavailable: {
    code: "EXECUTION_FAILED",
    text: "The call could not be claimed, so it was not run.",
  },
  policy_denied: {
    code: "EXECUTION_FAILED",
    text: "The call was refused by policy and was not run.",
  },
  approval_denied: {
    code: "EXECUTION_FAILED",
    text: "The call was not approved and was not run.",
  },
  callback_failed: { code: "EXECUTION_FAILED", text: "The function failed while running." },
};

/** The reply for a refusal taken after the message was validated (so the ID is usable). */
export function refusalReply(reason: GateRefusal, functionCallId: string): GateReply {
  const { code, text } = REFUSALS[reason];
  return code === "EXECUTION_FAILED"
    ? executionError(functionCallId, text)
    : invalidFunctionCall(functionCallId, text);
}

/**
 * Can `value` be the reply's `value`: JSON text exists for it (`undefined` is sent as `null`)?
 * `JSON.stringify` answers `undefined` for a function or a symbol and throws on a BigInt, a
 * cycle, a throwing getter or `toJSON`, or nesting too deep for the stack.
 */
export function sendable(value: unknown): boolean {
  if (value === undefined || value === null) return true;
  const type = typeof value;
  if (type === "string" || type === "boolean") return true;
  if (type === "number") return true; // NaN and ±Infinity are sent as null, as JSON has it
  try {
    return JSON.stringify(value) !== undefined;
  } catch {
    return false;
  }
}

/** The caller code a reply carries, or null for a value. */
export function replyCode(reply: GateReply): CallerCode | null {
  if ("error" in reply) return reply.error.code;
  const response = reply.rendererFunctionResponse;
  return "error" in response ? (response.error.code as CallerCode) : null;
}
