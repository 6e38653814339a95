/**
 * `@tessera/server`: the kernel's decisions over HTTP. `createTesseraService` is the request
 * listener a host mounts in its own `node:http` server; `listen` runs it stand-alone.
 */
export { type ListenOptions, listen, type RunningServer } from "./listen.js";
export {
  loadPrincipals,
  type Principal,
  parsePrincipals,
  tokenDigest,
} from "./principals.js";
export {
  createTesseraService,
  type RequestListener,
  type ServiceStores,
  type TesseraService,
  type TesseraServiceOptions,
} from "./service.js";
