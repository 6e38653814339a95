import { z } from "zod";

/**
 * `tools/call` as the gateway registers it with the SDK: the method only. The SDK parses a
 * request with the handler's schema before anything else and answers a mismatch as -32603, an
 * internal error: registered with its own `CallToolRequestSchema`, a caller's malformed params
 * (arguments that are not an object, no tool name, no params) read as a gateway fault. With
 * the method alone there, the SDK's `tools/call` wrapper checks the params next and answers
 * -32602, invalid params. The handler is called only with a request that passed that check,
 * so it reads the params as the SDK's type without parsing them a second time.
 */
export const ToolsCallRoute = z.object({
  method: z.literal("tools/call"),
  params: z.unknown().optional(),
});
