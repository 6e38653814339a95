import { DirectoryClaimStore } from "@tessera/a2ui";
import { type ClaimStore, type StoreBundle, TesseraError } from "@tessera/core";
import {
  listen,
  loadA2uiOptions,
  loadPrincipals,
  loadWebhookTransport,
  type RunningServer,
  type ServiceStores,
} from "@tessera/server";
import { loadJwtIdentity } from "@tessera/server/identity";
import { Command, Option } from "commander";
import { loadServeConfig, type ServeConfig, type ServeFlags } from "../config/load.js";
import { nonEmpty, wholeNumber } from "../options.js";
import { printable } from "../output.js";
import { openStoresByUrl } from "../stores.js";

type ServeCommandOptions = ServeFlags & { json?: boolean; logLevel: string };

export function serveCommand(): Command {
  return new Command("serve")
    .description(
      "serve the kernel over HTTP from a data directory (tessera init) or a store URL and principals file; flags win over TESSERA_* variables, which win over the data directory's tessera.json",
    )
    .option(
      "--data <dir>",
      "a data directory provisioned by tessera init (or TESSERA_DATA)",
      nonEmpty,
    )
    .option(
      "--store <url>",
      "shared store for grants, usage, audit and claims (sqlite:, postgres://, redis://; or TESSERA_STORE)",
      nonEmpty,
    )
    .option(
      "--principals <file>",
      "JSON: bearer-token SHA-256 → trusted identity, role and purpose (or TESSERA_PRINCIPALS); optional with --identity",
      nonEmpty,
    )
    .option("--host <host>", "address to listen on (default 127.0.0.1; or TESSERA_HOST)", nonEmpty)
    .option(
      "--port <port>",
      "port, 0 picks a free one (default 8787; or TESSERA_PORT)",
      wholeNumber(0, 65_535),
    )
    .option(
      "--webhooks <file>",
      'JSON: { "recipients": { name: { url, secret } } }; sends are POSTed there, signed (HMAC-SHA256) (or TESSERA_WEBHOOKS, or webhooks in tessera.json)',
      nonEmpty,
    )
    .option(
      "--a2ui <file>",
      "JSON: { catalogs, functionEndpoint? } for the A2UI gate routes (or TESSERA_A2UI, or a2ui in tessera.json)",
      nonEmpty,
    )
    .option(
      "--identity <file>",
      "JSON: the identity provider whose JWT access tokens are accepted beside the principals, or alone (issuer, audience, jwksUri, claims, tokenType; see docs/service.md; reloaded on SIGHUP) (or TESSERA_IDENTITY, or identity in tessera.json)",
      nonEmpty,
    )
    .option(
      "--headers-timeout <ms>",
      "a client's headers must arrive within this (default 10000; or TESSERA_HEADERS_TIMEOUT_MS, or headersTimeoutMs in tessera.json)",
      wholeNumber(1, 3_600_000),
    )
    .option(
      "--request-timeout <ms>",
      "a client's whole request, body included, must arrive within this (default 30000; or TESSERA_REQUEST_TIMEOUT_MS, or requestTimeoutMs)",
      wholeNumber(1, 3_600_000),
    )
    .option(
      "--keep-alive-timeout <ms>",
      "an idle kept-alive connection is closed after this (default 72000; or TESSERA_KEEP_ALIVE_TIMEOUT_MS, or keepAliveTimeoutMs)",
      wholeNumber(1, 3_600_000),
    )
    .option(
      "--connection-timeout <ms>",
      "a connection with no byte either way for this long is closed, even mid-answer (default 300000; or TESSERA_CONNECTION_TIMEOUT_MS, or connectionTimeoutMs)",
      wholeNumber(1, 3_600_000),
    )
    .addOption(
      new Option(
        "--log-level <level>",
        "the JSON log's level: one line per decision and per other request at info, health probes and a decision's request line at debug",
      )
        .choices(["fatal", "error", "warn", "info", "debug", "trace", "silent"])
        .default("info"),
    )
    .option(
      "--json",
      "print the listening and stopped events as JSON lines on stdout (without it they are text on stderr: stdout holds only JSON)",
    )
    .action(async (options: ServeCommandOptions) => {
      const config = loadServeConfig(options);
      // None with an identity provider alone: a JWT-only deployment (listen checks one way in).
      const principals = config.principals === undefined ? [] : loadPrincipals(config.principals);
      const transport =
        config.webhooks === undefined ? undefined : loadWebhookTransport(config.webhooks);
      const a2ui = config.a2ui === undefined ? undefined : loadA2uiOptions(config.a2ui);
      const identity = config.identity === undefined ? undefined : loadJwtIdentity(config.identity);
      // The CLI opens the stores itself, to word an open failure for the operator.
      const bundle = await openStoresByUrl(config.store);
      const claims =
        config.claims === undefined
          ? undefined
          : await DirectoryClaimStore.open(config.claims).catch(async (error: unknown) => {
              await bundle.close();
              throw error;
            });
      // A claim directory replaces the bundle's claim port, so the bundle's act ledger (which
      // claims in the database) must go with it: the service then composes its acts over the
      // directory, where retries look their claims up. Keeping both claimed in one store and
      // read in the other: every replay answered call_in_progress.
      const stores = claims === undefined ? bundle : withClaims(bundle, claims);
      const closeStores = async () => {
        await claims?.close();
        await bundle.close();
      };
      const server = await listen({
        stores,
        principals,
        host: config.host,
        port: config.port,
        ...config.timeouts,
        log: { level: options.logLevel },
        ...(transport === undefined ? {} : { transport }),
        ...(a2ui === undefined ? {} : { a2ui }),
        ...(identity === undefined ? {} : { identity }),
      }).catch(async (error: unknown) => {
        await closeStores();
        throw error;
      });
      // Warned once it listens: a bind that fails says only why it failed.
      warnIfExposed(config);
      if (transport === undefined) warnNoTransport();
      // SIGHUP reads the principals file and the identity file again: a revoked token, a new
      // audience or claim mapping need no restart.
      const reload = () => {
        if (config.principals !== undefined) {
          reloadPrincipals(server, config.principals, options.json);
        }
        if (config.identity !== undefined) reloadIdentity(server, config.identity, options.json);
      };
      process.on("SIGHUP", reload);
      const stopped = new Promise<void>((resolve) => {
        const stop = () => resolve();
        process.once("SIGINT", stop);
        process.once("SIGTERM", stop);
      });
      // Said only once every handler is in place: a signal sent on reading this line found the
      // default action (the process ended at once, the drain skipped) when it came first.
      announce(options.json, { event: "listening", url: server.url }, `listening on ${server.url}`);
      await stopped;
      process.off("SIGHUP", reload);
      // Still handled while the requests under way answer: Node's default for SIGHUP (a log
      // rotation, a config push) ends the process, cutting them and leaving their calls in doubt.
      const notWhileStopping = () =>
        announce(
          options.json,
          { event: "reload_ignored", reason: "stopping" },
          "SIGHUP ignored: stopping",
        );
      process.on("SIGHUP", notWhileStopping);
      // Said once the drain's SIGHUP handler is in place: from this line on a SIGHUP is
      // ignored, before it one is a reload (a SIGHUP and a SIGTERM pending together are
      // delivered lowest number first, so the reload comes first).
      announce(options.json, { event: "stopping" }, "stopping: answering the requests under way");
      try {
        await server.close();
        await closeStores();
      } finally {
        process.off("SIGHUP", notWhileStopping);
      }
      announce(options.json, { event: "stopped" }, "stopped");
    });
}

function withClaims(bundle: StoreBundle, claims: ClaimStore): ServiceStores {
  const { grants, usage, audit } = bundle;
  return { grants, usage, audit, claims };
}

/**
 * The principals file read again and put in force whole, or, when it cannot be read or does
 * not check (a half-written file, a typo), the set in force kept and the reason given: a bad
 * edit never leaves the service with no principals or a partial set.
 */
function reloadPrincipals(server: RunningServer, path: string, json: boolean | undefined): void {
  const outcome = server.reloadPrincipals(() => {
    if (path === "-") {
      throw new TesseraError(
        "invalid_config",
        "the principals came from standard input, which cannot be read again: name a file",
      );
    }
    return loadPrincipals(path);
  });
  if (outcome.reloaded) {
    announce(
      json,
      { event: "principals_reloaded", count: outcome.count },
      `principals reloaded from ${path}: ${outcome.count} in force`,
    );
    return;
  }
  const { count, code, message } = outcome;
  if (json) {
    announce(json, { event: "principals_not_reloaded", count, code, message }, "");
    return;
  }
  process.stderr.write(
    `tessera serve: warning: principals not reloaded, the ${count} in force stay: ${code}: ${message}\n`,
  );
}

/** The identity file read again and put in force, or the one in force kept and the reason given. */
function reloadIdentity(server: RunningServer, path: string, json: boolean | undefined): void {
  const outcome = server.reloadIdentity(() => loadJwtIdentity(path));
  if (outcome.reloaded) {
    announce(
      json,
      { event: "identity_reloaded", issuer: outcome.issuer },
      `identity reloaded from ${path}: tokens of ${outcome.issuer}`,
    );
    return;
  }
  const { code, message } = outcome;
  if (json) {
    announce(json, { event: "identity_not_reloaded", code, message }, "");
    return;
  }
  process.stderr.write(
    `tessera serve: warning: identity not reloaded, the one in force stays: ${code}: ${message}
`,
  );
}

/**
 * Standard output holds JSON only (the log's lines, and with --json these events), so it can
 * be piped to a log collector; the text form goes to standard error with the warnings.
 */
function announce(json: boolean | undefined, event: object, text: string): void {
  if (json) process.stdout.write(`${JSON.stringify(event)}\n`);
  else process.stderr.write(`tessera serve: ${printable(text)}\n`);
}

/**
 * Loopback only by default. Bound anywhere else without TLS, every bearer token crosses the
 * network in clear text: allowed (a TLS proxy may sit in front), but never silently.
 */
function warnIfExposed(config: ServeConfig): void {
  if (config.tls !== undefined || isLoopback(config.host)) return;
  process.stderr.write(
    `tessera serve: warning: listening on ${config.host} without TLS: bearer tokens cross the network in clear text; put a TLS-terminating proxy in front and say so (tls: "proxy" in tessera.json, or TESSERA_TLS=proxy)\n`,
  );
}

/**
 * Without webhooks the service has nowhere to deliver: `messages.send` is not listed and every
 * send is refused `tool_unavailable`, nothing spent. Legitimate (a host that only authorizes),
 * but an operator who forgot the file should hear it before an agent does.
 */
function warnNoTransport(): void {
  process.stderr.write(
    "tessera serve: warning: no webhooks configured: messages.send is not offered and every send is refused tool_unavailable (nothing is spent); give --webhooks, TESSERA_WEBHOOKS or webhooks in tessera.json\n",
  );
}

function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}
