import type { AddressInfo } from "node:net";
import { isTesseraError, openStores, type StoreBundle, TesseraError } from "@tessera/core";
import { buildApp } from "./app.js";
import { type JwtIdentityInput, parseJwtIdentity } from "./identity/config.js";
import type { JwtVerifier } from "./identity/verify.js";
import { PrincipalSet } from "./principal-set.js";
import {
  type Principal,
  type PrincipalInput,
  parsePrincipals,
  requireCallers,
} from "./principals.js";
import { appOptions, type ServiceStores, type TesseraServiceOptions } from "./service.js";
import { type ServerTimeouts, serverTimeouts } from "./timeouts.js";

export interface ListenOptions extends Omit<TesseraServiceOptions, "stores">, ServerTimeouts {
  /**
   * A store URL (`sqlite:./tessera.db`, `postgres://…`, `redis://…`), opened with core's
   * `openStores(url)` and closed by `close()`; or open stores the host keeps and closes.
   */
  readonly stores: string | ServiceStores;
  /** Default `127.0.0.1`. */
  readonly host?: string;
  /** Default 8787; 0 picks a free port. */
  readonly port?: number;
  /** How long `close()` lets running requests finish before cutting them (default 10 s). */
  readonly drainMs?: number;
}

export interface RunningServer {
  /** `http://127.0.0.1:8787`, with the port actually bound. */
  readonly url: string;
  /**
   * Graceful: stops accepting, lets running requests answer (up to `drainMs`, then cuts
   * them), then closes the stores it opened.
   */
  close(): Promise<void>;
  /**
   * Replaces the principals in force with the ones `read` returns (the principals file read
   * again, say), all at once: a removed token is refused from the next request. When `read`
   * throws, or what it returns does not check, the set in force stays whole; either way the
   * log says what happened, and so does the outcome.
   */
  reloadPrincipals(read: () => readonly (Principal | PrincipalInput)[]): ReloadOutcome;
  /**
   * Puts the identity config `read` returns in force (the identity file read again): its
   * issuer, audience, keys and claim mapping judge the next token, and every cached
   * verification is forgotten. When `read` throws or the config does not check, or the
   * service started without an identity provider, the one in force stays.
   */
  reloadIdentity(read: () => JwtIdentityInput): IdentityReloadOutcome;
}

export type IdentityReloadOutcome =
  | { readonly reloaded: true; readonly issuer: string }
  | { readonly reloaded: false; readonly code: string; readonly message: string };

export type ReloadOutcome =
  | { readonly reloaded: true; readonly count: number }
  | {
      readonly reloaded: false;
      /** How many principals stay in force. */
      readonly count: number;
      readonly code: string;
      readonly message: string;
    };

/** The service in a server of its own, listening once this resolves. */
export async function listen(options: ListenOptions): Promise<RunningServer> {
  // Checked before a store URL is opened: bad principals or timeouts cost no connection.
  const principals = new PrincipalSet(parsePrincipals({ principals: options.principals }));
  const hasIdentity = options.identity !== undefined;
  requireCallers(principals.current, hasIdentity);
  let verifier: JwtVerifier | undefined;
  const timeouts = serverTimeouts(options);
  const owned: StoreBundle | undefined =
    typeof options.stores === "string" ? await openStores(options.stores) : undefined;
  const stores = owned ?? (options.stores as ServiceStores);
  const host = options.host ?? "127.0.0.1";
  const port = options.port ?? 8787;
  let app: ReturnType<typeof buildApp>;
  try {
    app = buildApp({
      ...appOptions({ ...options, stores }),
      principals,
      timeouts,
      onVerifier: (built) => {
        verifier = built;
      },
    });
    await app.listen({ host, port }).catch((error: unknown) => {
      throw listenFailure(error, `${host.includes(":") ? `[${host}]` : host}:${port}`);
    });
  } catch (error) {
    await owned?.close();
    throw error;
  }
  const { address, port: bound } = app.server.address() as AddressInfo;
  let closing: Promise<void> | undefined;
  const running: RunningServer = {
    url: `http://${address.includes(":") ? `[${address}]` : address}:${bound}`,
    close: () => {
      closing ??= (async () => {
        // A client that never finishes its body must not hold the shutdown forever.
        const cut = setTimeout(() => app.server.closeAllConnections(), options.drainMs ?? 10_000);
        try {
          await app.close();
        } finally {
          clearTimeout(cut);
        }
        await owned?.close();
      })();
      return closing;
    },
    reloadPrincipals: (read) => {
      let next: readonly Principal[];
      try {
        next = parsePrincipals({ principals: read() });
        requireCallers(next, hasIdentity);
      } catch (error) {
        const code = isTesseraError(error) ? error.code : "invalid_config";
        const message = error instanceof Error ? error.message : String(error);
        const count = principals.current.length;
        app.log.warn({ code, reason: message, inForce: count }, "principals not reloaded");
        return { reloaded: false, count, code, message };
      }
      principals.replace(next);
      app.log.info({ inForce: next.length }, "principals reloaded");
      return { reloaded: true, count: next.length };
    },
    reloadIdentity: (read) => {
      try {
        if (verifier === undefined) {
          throw new TesseraError(
            "invalid_config",
            "the service started without an identity provider: restart it to add one",
          );
        }
        const next = parseJwtIdentity(read());
        verifier.reconfigure(next);
        app.log.info({ identity: { issuer: next.issuer } }, "identity reloaded");
        return { reloaded: true, issuer: next.issuer };
      } catch (error) {
        const code = isTesseraError(error) ? error.code : "invalid_config";
        const message = error instanceof Error ? error.message : String(error);
        app.log.warn({ code, reason: message }, "identity not reloaded");
        return { reloaded: false, code, message };
      }
    },
  };
  return Object.freeze(running);
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
