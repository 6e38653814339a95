import type { IncomingMessage, ServerResponse } from "node:http";
import { createKernel, type StoreBundle } from "@tessera/core";
import { problem, send } from "./http.js";
import { type Principal, parsePrincipals } from "./principals.js";
import { readinessProbe } from "./readiness.js";
import { failure, logUnexpected, type Routes, route } from "./routes.js";

/** The ports a decision touches: any `StoreBundle` from `openStores(url)` serves. */
export type ServiceStores = Pick<StoreBundle, "grants" | "usage" | "audit">;

export interface TesseraServiceOptions {
  /** Open stores, owned by the host: the service never closes them. */
  readonly stores: ServiceStores;
  /** Who may call, and as whom (`loadPrincipals(path)` reads them from a file). */
  readonly principals: readonly Principal[];
}

/** A `node:http` request listener: `createServer(service.handler)`, or a route of the host's. */
export type RequestListener = (request: IncomingMessage, response: ServerResponse) => void;

export interface TesseraService {
  readonly handler: RequestListener;
  /**
   * Stops taking requests (later ones are answered 503 `unavailable`) and resolves once the
   * ones already running have answered, so the host may then close the stores. A request
   * whose body is still arriving holds it: close the host's connections first.
   */
  close(): Promise<void>;
}

/**
 * The kernel's decisions over HTTP, for hosts that are not written in TypeScript, as a request
 * listener a host mounts in its own server (`listen` is the stand-alone server around it):
 * `POST /v1/authorize`, `GET /v1/explain?callId=`, `GET /healthz`, `GET /readyz`. The service
 * does not deliver messages or run functions.
 */
export function createTesseraService(options: TesseraServiceOptions): TesseraService {
  const { stores } = options;
  const routes: Routes = {
    kernel: createKernel({ grants: stores.grants, usage: stores.usage, audit: stores.audit }),
    stores,
    principals: parsePrincipals({ principals: options.principals }),
    ready: readinessProbe(stores),
  };
  const running = new Set<Promise<void>>();
  let closed = false;
  const handler: RequestListener = (request, response) => {
    if (closed) {
      send(response, problem(503, "unavailable", "the service is closed"));
      return;
    }
    const answered = route(request, routes)
      .catch(failure)
      .then((reply) => send(response, reply))
      .catch(logUnexpected);
    running.add(answered);
    void answered.then(() => running.delete(answered));
  };
  return Object.freeze({
    handler,
    close: async () => {
      closed = true;
      await Promise.all(running);
    },
  });
}
