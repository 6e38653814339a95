import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { Protocol } from "@modelcontextprotocol/sdk/shared/protocol.js";
import { type CallToolRequest, CallToolRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { gatewayError } from "./errors.js";

/**
 * `tools/call` as the gateway registers it with the SDK: the method only, so the SDK's own parse
 * of the request (by the handler's schema, answered -32603 when it fails: an internal error)
 * never refuses a caller's malformed params.
 */
const ToolsCallRoute = z.object({
  method: z.literal("tools/call"),
  params: z.unknown().optional(),
});

/** Issues named in an invalid-params message at most; the rest are counted. */
const MAX_ISSUES = 3;

/**
 * Registers `handler` for `tools/call` on `server`, past the SDK `Server`'s own `tools/call`
 * wrapper: that wrapper answers malformed params -32602, rightly, but with zod's issue list as
 * a multi-line JSON dump for a message. The params are checked here instead, against the same
 * `CallToolRequestSchema`, and a mismatch is -32602 with one line naming each field and what
 * is wrong with it. The wrapper's other work (results of task-augmented calls) the gateway
 * has no use for: it declares no tasks, and forwards results its SDK client already checked.
 */
export function handleToolsCall(
  server: Server,
  handler: (request: CallToolRequest, extra: ToolsCallExtra) => Promise<unknown>,
): void {
  const register = Protocol.prototype.setRequestHandler as unknown as (
    this: Server,
    schema: typeof ToolsCallRoute,
    handle: (raw: unknown, extra: ToolsCallExtra) => Promise<unknown>,
  ) => void;
  register.call(server, ToolsCallRoute, (raw, extra) => handler(readCallRequest(raw), extra));
}

/** What the SDK hands a request handler, as the gateway reads it. */
export type ToolsCallExtra = Parameters<Parameters<Server["setRequestHandler"]>[1]>[1];

/** The request as the SDK's type, or -32602 with a one-line message. */
export function readCallRequest(raw: unknown): CallToolRequest {
  const parsed = CallToolRequestSchema.safeParse(raw);
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues;
  const named = issues.slice(0, MAX_ISSUES).map((issue) => {
    const path = issue.path.map(String).join(".");
    return `${path === "" ? "request" : path}: ${issue.message}`;
  });
  const more = issues.length > MAX_ISSUES ? ` (and ${issues.length - MAX_ISSUES} more)` : "";
  throw gatewayError("invalid_request", `invalid tools/call request: ${named.join("; ")}${more}`);
}
