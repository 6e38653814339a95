/**
 * `@tessera/client`: the Tessera service over HTTP, typed by the same contracts the service
 * validates with (`@tessera/core/http`).
 */
export {
  type CallOptions,
  createTesseraClient,
  type DecisionResponse,
  type RouteResponse,
  TesseraClient,
  type TesseraClientOptions,
} from "./client.js";
export { isTesseraClientError, TesseraClientError } from "./errors.js";
export type { RetryPolicy } from "./retry.js";
