import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { openStores, type StoreBundle, TesseraError } from "@tessera/core";
import { type Principal, parsePrincipals } from "./principals.js";
import { createTesseraService, type ServiceStores } from "./service.js";

export interface ListenOptions {
  /**
   * A store URL (`sqlite:./tessera.db`, `postgres://…`, `redis://…`), opened with core's
   * `openStores(url)` and closed by `close()`; or open stores the host keeps and closes.
   */
  readonly stores: string | ServiceStores;
  readonly principals: readonly Principal[];
  /** Default `127.0.0.1`. */
  readonly host?: string;
  /** Default 8787; 0 picks a free port. */
  readonly port?: number;
}

export interface RunningServer {
  /** `http://127.0.0.1:8787`, with the port actually bound. */
  readonly url: string;
  /** Stops listening, cuts open connections, waits for running decisions, closes owned stores. */
  close(): Promise<void>;
}

/** The service in a `node:http` server of its own, listening once this resolves. */
export async function listen(options: ListenOptions): Promise<RunningServer> {
  const principals = parsePrincipals({ principals: options.principals });
  const owned: StoreBundle | undefined =
    typeof options.stores === "string" ? await openStores(options.stores) : undefined;
  const stores = owned ?? (options.stores as ServiceStores);
  const service = createTesseraService({ stores, principals });
  const server = createServer(service.handler);
  const host = options.host ?? "127.0.0.1";
  const port = options.port ?? 8787;
  try {
    await new Promise<void>((resolve, reject) => {
      server.once("error", (error) =>
        reject(listenFailure(error, `${host.includes(":") ? `[${host}]` : host}:${port}`)),
      );
      server.listen(port, host, () => resolve());
    });
  } catch (error) {
    await owned?.close();
    throw error;
  }
  const { address, port: bound } = server.address() as AddressInfo;
  let closing: Promise<void> | undefined;
  return Object.freeze({
    url: `http://${address.includes(":") ? `[${address}]` : address}:${bound}`,
    close: () => {
      closing ??= (async () => {
        // Cut first, as before: a client still sending its body must not hold the shutdown.
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
        // Then let the decisions already taken finish writing before their stores close.
        await service.close();
        await owned?.close();
      })();
      return closing;
    },
  });
}

/** A listen failure the operator can act on, as a stable code instead of a stack. */
function listenFailure(error: unknown, where: string): unknown {
  const cause = { cause: error };
  switch ((error as NodeJS.ErrnoException).code) {
    case "EADDRINUSE":
      return new TesseraError(
        "address_in_use",
        `another process already listens on ${where}`,
        cause,
      );
    case "EADDRNOTAVAIL":
      return new TesseraError(
        "address_unavailable",
        `${where}: not an address of this machine`,
        cause,
      );
    case "EACCES":
      return new TesseraError("address_unavailable", `not permitted to listen on ${where}`, cause);
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return new TesseraError(
        "address_unavailable",
        `${where}: the host name does not resolve`,
        cause,
      );
    default:
      return error;
  }
}
