/**
 * `@tessera/core/http`: the service's wire contracts, shared by `@tessera/server` (request
 * validation, OpenAPI) and `@tessera/client` (response validation).
 */
export { bearerToken, MAX_BEARER_CHARS } from "./bearer.js";
export * from "./bodies.js";
export { readBoundedText } from "./bounded-text.js";
export { ROUTES, type RouteName, type RouteSpec } from "./routes.js";
export {
  formatTraceparent,
  newCallId,
  newTraceId,
  parseTraceparent,
  parseTracestate,
  type TraceParent,
} from "./trace-context.js";
