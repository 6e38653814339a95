import { TesseraError } from "@tessera/core";
import { listenMcpGateway, loadGatewayConfig, openMcpGateway, serveMcpStdio } from "@tessera/mcp";
import { Command } from "commander";
import { nonEmpty, wholeNumber } from "../options.js";

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
    .option("--json", "print the listening and stopped events as JSON lines")
    .action(async (options: McpCommandOptions) => {
      const config = loadGatewayConfig(options.config);
      const token = process.env.TESSERA_MCP_TOKEN;
      if (options.stdio && (token === undefined || token === "")) {
        throw new TesseraError(
          "invalid_usage",
          "--stdio needs the caller's token in TESSERA_MCP_TOKEN",
        );
      }
      const opened = await openMcpGateway(config);
      const stopped = new Promise<void>((resolve) => {
        process.once("SIGINT", () => resolve());
        process.once("SIGTERM", () => resolve());
      });
      if (options.stdio) {
        const served = await serveMcpStdio(opened.gateway, token as string).catch(
          async (error: unknown) => {
            await opened.close();
            throw error;
          },
        );
        process.stderr.write("tessera mcp: serving on stdio\n");
        await Promise.race([stopped, served.closed]);
        await opened.close();
        return;
      }
      const listening = await listenMcpGateway(opened.gateway, {
        host: options.host ?? "127.0.0.1",
        port: options.port ?? 8931,
      }).catch(async (error: unknown) => {
        await opened.close();
        throw error;
      });
      announce(
        options.json,
        { event: "listening", url: listening.url },
        `listening on ${listening.url}`,
      );
      await stopped;
      await listening.close();
      await opened.close();
      announce(options.json, { event: "stopped" }, "stopped");
    });
}

function announce(json: boolean | undefined, event: object, text: string): void {
  process.stdout.write(json ? `${JSON.stringify(event)}\n` : `tessera mcp: ${text}\n`);
}
