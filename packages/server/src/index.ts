/**
 * `@tessera/server`: the kernel's decisions, message sends and grants over HTTP (Fastify).
 * `listen` runs it stand-alone; `createTesseraService` is the request listener a host mounts
 * in its own `node:http` server; `buildApp` is the Fastify app itself.
 */
export { type AppOptions, buildApp, MAX_BODY_BYTES } from "./app.js";
export { loadA2uiOptions, loadWebhookTransport } from "./config-files.js";
export {
  type IdentityReloadOutcome,
  type ListenOptions,
  listen,
  type ReloadOutcome,
  type RunningServer,
} from "./listen.js";
export { openApiDocument } from "./openapi.js";
export {
  loadPrincipals,
  type Principal,
  type PrincipalInput,
  parsePrincipals,
  tokenDigest,
} from "./principals.js";
export type { A2uiOptions } from "./routes/a2ui.js";
export {
  createTesseraService,
  type RequestListener,
  type ServiceStores,
  type TesseraService,
  type TesseraServiceOptions,
} from "./service.js";
export { DEFAULT_TIMEOUTS, type ServerTimeouts } from "./timeouts.js";
export {
  verifyWebhookSignature,
  type WebhookRecipient,
  type WebhookTransportOptions,
  webhookTransport,
} from "./transport/webhook.js";
