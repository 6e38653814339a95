/**
 * `@tessera/client`: the Tessera service over HTTP, typed by the same contracts the service
 * validates with (`@tessera/core/http`).
 */
export { createTesseraClient, TesseraClient } from "./client.js";
export { isTesseraClientError, TesseraClientError } from "./errors.js";
export type {
  CallOptions,
  DecisionResponse,
  RouteResponse,
  TesseraClientOptions,
} from "./options.js";
export type { RetryPolicy } from "./retry.js";
