import {
  type CallToolRequest,
  CallToolRequestSchema,
  ErrorCode,
  McpError,
} from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

/**
 * `tools/call` as the gateway registers it with the SDK: the method only. The SDK parses a
 * request with the handler's schema before anything else and answers a mismatch as -32603, an
 * internal error: registered with its own `CallToolRequestSchema`, a caller's malformed params
 * (arguments that are not an object, no tool name, no params) read as a gateway fault. With
 * the method alone there, the SDK's `tools/call` wrapper checks the params next and answers
 * -32602, invalid params; `checkCallRequest` then reads them for the handler.
 */
export const ToolsCallRoute = z.object({
  method: z.literal("tools/call"),
  params: z.unknown().optional(),
});

/**
 * The request as the SDK's own schema reads it, or -32602 naming each field at fault (the
 * SDK's wrapper has refused such a request already; this keeps the handler's types its own).
 */
export function checkCallRequest(request: unknown): CallToolRequest {
  const parsed = CallToolRequestSchema.safeParse(request);
  if (parsed.success) return parsed.data;
  const where = parsed.error.issues
    .slice(0, 5)
    .map((issue) => `${issue.path.join(".") || "request"}: ${issue.message}`)
    .join("; ");
  throw new McpError(ErrorCode.InvalidParams, `tools/call: ${where}`);
}
