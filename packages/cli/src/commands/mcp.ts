import { type AuditEvent, TesseraError } from "@tessera/core";
import {
  type GatewayConfig,
  listenMcpGateway,
  loadGatewayConfig,
  openMcpGateway,
  type ProtectedResource,
  serveMcpStdio,
} from "@tessera/mcp";
import { JwtVerifier, loadJwtIdentity } from "@tessera/server/identity";
import { Command } from "commander";
import { nonEmpty, wholeNumber } from "../options.js";
import { printable } from "../output.js";

/**
 * Every event `--json` prints, in the order a run can print them: `say` takes no other, so
 * the help (which names each from this list) says what the command can emit.
 */
export const MCP_JSON_EVENTS = [
  "listening",
  "serving",
  "reload_ignored",
  "stopping",
  "stopped",
] as const;
type McpJsonEvent = (typeof MCP_JSON_EVENTS)[number];
/** `--json`'s help: each event the command prints, by name. */
const JSON_HELP = `print the ${MCP_JSON_EVENTS.slice(0, -1).join(", ")} and ${MCP_JSON_EVENTS.at(-1)} events as JSON lines ({"event":…}; on stderr with --stdio)`;

interface McpCommandOptions {
  config: string;
  stdio?: boolean;
  host?: string;
  port?: number;
  json?: boolean;
}

/**
 * `tessera mcp`: the MCP gateway from a config file. Over stdio the token comes from
 * TESSERA_MCP_TOKEN (never a flag: a flag shows in the process list), and nothing but MCP is
 * written to stdout. The config's paths are read against its own folder and its store is never
 * created here (see @tessera/mcp's config-paths.ts): a desktop app starts it from `/`.
 */
export function mcpCommand(): Command {
  return new Command("mcp")
    .description(
      "run the MCP gateway in front of the upstream MCP servers a config file names: per-tool grants, single-use tickets and replay claims (Streamable HTTP at /mcp, or --stdio)",
    )
    .requiredOption(
      "--config <file>",
      "JSON: upstreams, tool bindings, principals, stores URL, limits; its relative paths are its folder's, and a sqlite store must exist (tessera init)",
      nonEmpty,
    )
    .option("--stdio", "serve one client over stdin/stdout; the token is TESSERA_MCP_TOKEN")
    .option("--host <host>", "address to listen on (default 127.0.0.1)", nonEmpty)
    .option("--port <port>", "port, 0 picks a free one (default 8931)", wholeNumber(0, 65_535))
    .option("--json", JSON_HELP)
    .action(async (options: McpCommandOptions) => {
      const config = loadGatewayConfig(options.config);
      if (options.stdio && config.principals.length === 0) {
        // Said before anything is opened: stdio carries no header, so no JWT to verify.
        throw new TesseraError(
          "invalid_config",
          `${options.config} names no principal (JWT-only): a stdio connection carries no bearer token to verify, so --stdio needs a static principal; or serve HTTP`,
        );
      }
      const token = process.env.TESSERA_MCP_TOKEN;
      if (options.stdio && (token === undefined || token === "")) {
        throw new TesseraError(
          "invalid_usage",
          "--stdio needs the caller's token in TESSERA_MCP_TOKEN",
        );
      }
      const protectedResource = identityOf(config);
      const opened = await openMcpGateway(config, {
        ...(protectedResource === undefined ? {} : { protectedResource }),
        onDecision: logDecision,
      });
      const stopped = new Promise<void>((resolve) => {
        process.once("SIGINT", () => resolve());
        process.once("SIGTERM", () => resolve());
      });
      // Over stdio, standard output is the MCP protocol itself: the lines go to standard error.
      const say = (event: { event: McpJsonEvent } & Record<string, unknown>, text: string) =>
        announce(options.json, options.stdio ? process.stderr : process.stdout, event, text);
      // Node's default for SIGHUP (a log rotation, a service manager's reload) ends the
      // process, cutting the calls under way and leaving them in doubt. The gateway reads its
      // config only at start, so there is nothing to reload: say so and go on.
      const noReload = () =>
        say(
          { event: "reload_ignored", reason: "no_reload" },
          "SIGHUP ignored: the config is read at start; restart to apply a change",
        );
      if (options.stdio) {
        const served = await serveMcpStdio(opened.gateway, token as string).catch(
          async (error: unknown) => {
            await opened.close();
            throw error;
          },
        );
        process.on("SIGHUP", noReload);
        say({ event: "serving", transport: "stdio" }, "serving on stdio");
        const signalled = await Promise.race([
          stopped.then(() => true),
          served.closed.then(() => false),
        ]);
        // A client that closed stdin is gone quietly, as before; its calls still answer first.
        if (signalled) say({ event: "stopping" }, "stopping: answering the calls under way");
        try {
          await served.close();
          await opened.close();
        } finally {
          process.off("SIGHUP", noReload);
        }
        if (signalled) say({ event: "stopped" }, "stopped");
        return;
      }
      const listening = await listenMcpGateway(opened.gateway, {
        host: options.host ?? "127.0.0.1",
        port: options.port ?? 8931,
      }).catch(async (error: unknown) => {
        await opened.close();
        throw error;
      });
      process.on("SIGHUP", noReload);
      say({ event: "listening", url: listening.url }, `listening on ${listening.url}`);
      await stopped;
      say({ event: "stopping" }, "stopping: answering the calls under way");
      try {
        await listening.close();
        await opened.close();
      } finally {
        process.off("SIGHUP", noReload);
      }
      say({ event: "stopped" }, "stopped");
    });
}

/**
 * One JSON line per tool call decision, on standard error: with --stdio, standard output is
 * the MCP protocol itself. Built from the decision's audit event, so it holds what audit holds
 * (call ID, principal, action, resource, outcome, code, reason, trace ID, grant), never the
 * call's arguments, its result or a token.
 */
function logDecision(event: AuditEvent): void {
  const line = {
    level: 30,
    time: Date.now(),
    msg: "decision",
    source: event.source,
    callId: event.callId,
    principal: {
      namespaceId: event.namespaceId,
      actor: event.actor,
      authority: event.authority,
      ...(event.owner === undefined ? {} : { owner: event.owner }),
    },
    action: event.action,
    resource: event.resource,
    outcome: event.outcome,
    code: event.code,
    reason: event.reason,
    traceId: event.traceId,
    ...(event.grantId === undefined ? {} : { grantId: event.grantId }),
    ...(event.detail === undefined ? {} : { detail: event.detail }),
  };
  process.stderr.write(`${JSON.stringify(line)}\n`);
}

/**
 * The identity provider named by the config: its tokens verified by the same code as the
 * service's, its `audience` the gateway's resource URL, each refusal one stderr line (what
 * failed, never the token).
 */
function identityOf(config: GatewayConfig): ProtectedResource | undefined {
  if (config.identity === undefined) return undefined;
  const identity = loadJwtIdentity(config.identity);
  const verifier = new JwtVerifier(identity, {
    onKeyLoadError: (error) =>
      process.stderr.write(
        `tessera mcp: the issuer's keys could not be loaded: ${error instanceof Error ? error.message : "error"}\n`,
      ),
  });
  return {
    resource: identity.audience,
    authorizationServers: [identity.issuer],
    ...(identity.requiredScope === undefined ? {} : { requiredScope: identity.requiredScope }),
    verifier,
    onRefused: ({ reason, detail }) =>
      process.stderr.write(`tessera mcp: bearer token refused: ${printable(detail)} (${reason})\n`),
  };
}

function announce(
  json: boolean | undefined,
  to: NodeJS.WritableStream,
  event: object,
  text: string,
): void {
  to.write(json ? `${JSON.stringify(event)}\n` : `tessera mcp: ${printable(text)}\n`);
}
