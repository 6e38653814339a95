import type { IncomingMessage, ServerResponse } from "node:http";
import { ERROR_CATALOG, type MessageTransport } from "@tessera/core";
import { type AppOptions, buildApp } from "./app.js";
import { HttpProblem } from "./errors.js";
import { type Principal, type PrincipalInput, parsePrincipals } from "./principals.js";
import type { ServiceStores } from "./stores.js";

export type { ServiceStores } from "./stores.js";

export interface TesseraServiceOptions {
  /** Open stores, owned by the host: the service never closes them. */
  readonly stores: ServiceStores;
  /** Who may call, and as whom (`loadPrincipals(path)` reads them from a file). */
  readonly principals: readonly (Principal | PrincipalInput)[];
  /** JWT access tokens of the host's identity provider, beside the static principals. */
  readonly identity?: AppOptions["identity"];
  /**
   * Delivers authorized messages (`webhookTransport`, or core's `InProcessTransport`). Without
   * one, `messages.send` is not listed and sends are refused `tool_unavailable`, nothing spent.
   */
  readonly transport?: MessageTransport;
  /** JSON logs: `false` for none, or a level and a stream. Default: info to stdout. */
  readonly log?: AppOptions["log"];
  /** How long a retry waits for the first request of its call ID (default 5 s). */
  readonly retryWaitMs?: number;
  /** The A2UI gate: catalogs, and the function endpoint of the one-step mode. */
  readonly a2ui?: AppOptions["a2ui"];
  /** When denials without a call ID are written (see `AppOptions.audit`). */
  readonly audit?: AppOptions["audit"];
}

/** A `node:http` request listener: `createServer(service.handler)`, or a route of the host's. */
export type RequestListener = (request: IncomingMessage, response: ServerResponse) => void;

export interface TesseraService {
  readonly handler: RequestListener;
  /**
   * Stops taking requests (later ones are answered 503) and resolves once the ones already
   * running have answered, so the host may then close the stores.
   */
  close(): Promise<void>;
}

/**
 * The service as a request listener a host mounts in its own `node:http` server (`listen` is
 * the stand-alone server around it). Routes: see `ROUTES` in `@tessera/core/http`.
 */
export function createTesseraService(options: TesseraServiceOptions): TesseraService {
  let routing: RequestListener | undefined;
  const app = buildApp({
    ...appOptions(options),
    onHandler: (handler) => {
      routing = handler;
    },
  });
  const ready = app.ready();
  const running = new Set<Promise<void>>();
  let closed = false;
  const handler: RequestListener = (request, response) => {
    if (closed) {
      const problem = new HttpProblem("unavailable", "the service is closed");
      response.writeHead(problem.status, {
        "content-type": "application/json",
        connection: "close",
      });
      response.end(JSON.stringify(problem.body()));
      return;
    }
    const finished = new Promise<void>((resolve) => response.once("close", resolve));
    running.add(finished);
    void finished.then(() => running.delete(finished));
    void ready.then(
      () => routing?.(request, response),
      () => {
        response.writeHead(ERROR_CATALOG.internal_error.httpStatus).end();
      },
    );
  };
  return Object.freeze({
    handler,
    close: async () => {
      closed = true;
      await Promise.all(running);
      await app.close();
    },
  });
}

export function appOptions(options: TesseraServiceOptions): AppOptions {
  return {
    stores: options.stores,
    principals: parsePrincipals({ principals: options.principals }),
    ...(options.transport === undefined ? {} : { transport: options.transport }),
    ...(options.log === undefined ? {} : { log: options.log }),
    ...(options.retryWaitMs === undefined ? {} : { retryWaitMs: options.retryWaitMs }),
    ...(options.a2ui === undefined ? {} : { a2ui: options.a2ui }),
    ...(options.audit === undefined ? {} : { audit: options.audit }),
    ...(options.identity === undefined ? {} : { identity: options.identity }),
  };
}
