/**
 * `@tessera/mcp`: Tessera's two guarantees in front of MCP servers — per-tool grants and
 * single-use tickets decided by the kernel, and replay claims in a shared claim store — built
 * on the official MCP SDK.
 */

export {
  type BearerRefusal,
  type BearerVerifier,
  type ProtectedResource,
  resourceMetadata,
  resourceMetadataUrl,
} from "./bearer.js";
export {
  type GatewayConfig,
  type GatewayConfigInput,
  type Limits,
  loadGatewayConfig,
  type Principal,
  parseGatewayConfig,
  type ToolRule,
  type UpstreamSpec,
} from "./config.js";
export { createMcpGateway, type McpGateway, type McpGatewayOptions } from "./gateway.js";
export { CALL_ID_KEY, CODE_KEY, IDEMPOTENCY_KEY } from "./keys.js";
export {
  type ListeningGateway,
  listenMcpGateway,
  type OpenedGateway,
  openMcpGateway,
  serveMcpStdio,
} from "./listen.js";
export { explainPrincipal, tokenDigest } from "./principals.js";
export type { StoreFailure, StoreFailureObserver } from "./store-failures.js";
export { MCP_NAMESPACE, TOOLS_CALL } from "./tool-grants.js";
export type { McpTransport, UpstreamInput } from "./types.js";
