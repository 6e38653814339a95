import { listen, loadPrincipals } from "@tessera/server";
import { Command } from "commander";
import { nonEmpty, wholeNumber } from "../options.js";
import { openStoresByUrl } from "../stores.js";

interface ServeCommandOptions {
  store: string;
  principals: string;
  host: string;
  port: number;
}

export function serveCommand(): Command {
  return new Command("serve")
    .description(
      "serve kernel decisions over HTTP: POST /v1/authorize, GET /v1/explain?callId=, GET /healthz, GET /readyz",
    )
    .requiredOption(
      "--store <url>",
      "shared store for grants, usage and audit (sqlite:, postgres://, redis://)",
      nonEmpty,
    )
    .requiredOption(
      "--principals <file>",
      "JSON: bearer-token SHA-256 → trusted turn identity (and purpose)",
      nonEmpty,
    )
    .option("--host <host>", "address to listen on", nonEmpty, "127.0.0.1")
    .option("--port <port>", "port (0 picks a free one)", wholeNumber(0, 65_535), 8787)
    .action(async (options: ServeCommandOptions) => {
      const principals = loadPrincipals(options.principals);
      // The CLI opens the stores itself, to word an open failure for the operator.
      const stores = await openStoresByUrl(options.store);
      const server = await listen({
        stores,
        principals,
        host: options.host,
        port: options.port,
      }).catch(async (error: unknown) => {
        await stores.close();
        throw error;
      });
      process.stdout.write(`tessera serve: listening on ${server.url}\n`);
      await new Promise<void>((resolve) => {
        const stop = () => resolve();
        process.once("SIGINT", stop);
        process.once("SIGTERM", stop);
      });
      await server.close();
      await stores.close();
      process.stdout.write("tessera serve: stopped\n");
    });
}
