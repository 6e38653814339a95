import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import type { ErrorCode as TesseraCode } from "@tessera/core";

/**
 * Protocol-level problems are JSON-RPC errors; `data.code` carries Tessera's stable code. Policy
 * refusals are not errors: they are tool results with `isError: true` (see calls.ts).
 */
const RPC_CODES = {
  invalid_request: ErrorCode.InvalidParams,
  idempotency_key_required: ErrorCode.InvalidParams,
  call_id_conflict: ErrorCode.InvalidParams,
  // Server-defined range: the request was well formed, its key's first call decides.
  call_in_progress: -32010,
  call_in_doubt: -32011,
  upstream_failed: -32012,
  claim_store_unavailable: ErrorCode.InternalError,
  audit_unavailable: ErrorCode.InternalError,
  grant_store_unavailable: ErrorCode.InternalError,
  internal_error: ErrorCode.InternalError,
} as const satisfies Partial<Record<TesseraCode, number>>;

/** Codes of core's error catalogue (docs/codes.md), each with its JSON-RPC error code. */
export type GatewayErrorCode = keyof typeof RPC_CODES;

/**
 * An `McpError` whose `message` is the message alone. The SDK's constructor prefixes it
 * (`MCP error -32602: …`), the server sends `message` as it is, and the client's SDK prefixes
 * what it receives again: a client read `MCP error -32602: MCP error -32602: …`.
 */
export function gatewayError(code: GatewayErrorCode, message: string): McpError {
  const error = new McpError(RPC_CODES[code], message, { code });
  Object.defineProperty(error, "message", { value: message, writable: true, configurable: true });
  return error;
}
