import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { UpstreamSpec } from "./config.js";

/**
 * An MCP transport: the SDK's `Transport`, typed structurally here. The SDK's own declaration
 * names `HeadersInit`, a DOM type, so naming it in this package's public types would make every
 * consumer without the DOM lib fail to compile with `skipLibCheck` off. Any SDK transport fits.
 */
export interface McpTransport {
  start(): Promise<void>;
  send(message: JSONRPCMessage, options?: unknown): Promise<void>;
  close(): Promise<void>;
  onclose?(): void;
  onerror?(error: Error): void;
  onmessage?(message: JSONRPCMessage, extra?: unknown): void;
  readonly sessionId?: string;
}

/** An upstream given as a config entry, or as a transport the host built (tests, in-process). */
export type UpstreamInput = UpstreamSpec | { readonly transport: McpTransport };
