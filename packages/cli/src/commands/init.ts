import { TesseraError } from "@tessera/core";
import { Command } from "commander";
import { dataDirFromEnv } from "../config/env.js";
import { DEFAULT_HOST, DEFAULT_PORT } from "../config/load.js";
import { provisionDataDir } from "../config/provision.js";
import { nonEmpty, wholeNumber } from "../options.js";
import { printJson, printLines } from "../output.js";

interface InitOptions {
  data?: string;
  namespace: string;
  authority: string;
  host: string;
  port: number;
  agent: string;
  json?: boolean;
}

export function initCommand(): Command {
  return (
    new Command("init")
      .description(
        "provision a data directory for tessera serve: private claim directory, SQLite database, config, first issuer token and first agent token",
      )
      .argument(
        "[dir]",
        "the directory to provision (new, or empty); default $TESSERA_DATA or ./tessera-data",
        // `init "$DIR"` with DIR unset is a slip, never the current directory.
        nonEmpty,
      )
      // The flag every other command names a data directory with, so `init --data d` then
      // `serve --data d` reads as one flow.
      .option("--data <dir>", "the same as [dir]", nonEmpty)
      .option("--namespace <id>", "the tokens' namespace", nonEmpty, "default")
      .option(
        "--authority <id>",
        "the issuer token's authority (the issuer of its grants)",
        nonEmpty,
        "host",
      )
      .option(
        "--agent <id>",
        "the agent token's actor: the subject its grants name",
        nonEmpty,
        "agent",
      )
      .option(
        "--host <host>",
        "address serve listens on, written to the config",
        nonEmpty,
        DEFAULT_HOST,
      )
      .option(
        "--port <port>",
        "port serve listens on, written to the config",
        wholeNumber(0, 65_535),
        DEFAULT_PORT,
      )
      .option("--json", "print JSON")
      .action(async (dir: string | undefined, options: InitOptions) => {
        if (dir !== undefined && options.data !== undefined && dir !== options.data) {
          throw new TesseraError(
            "invalid_usage",
            `two directories given (${dir} and --data ${options.data}); give one`,
          );
        }
        // An empty TESSERA_DATA is refused as every command refuses it: taken as a path, it
        // named the current directory, which init then provisioned and closed to others.
        const target = dir ?? options.data ?? dataDirFromEnv() ?? "tessera-data";
        const made = await provisionDataDir(target, options);
        if (options.json) {
          printJson(made);
          return;
        }
        printLines([
          `tessera init: provisioned ${made.dataDir}`,
          `  config      ${made.config}`,
          `  database    ${made.database}`,
          `  claims      ${made.claims} (0700)`,
          `  principals  ${made.principals}`,
          "",
          "issuer token (shown once; only its SHA-256 is stored, keep it secret):",
          `  ${made.issuerToken}`,
          `agent token, actor ${options.agent} (shown once, keep it secret):`,
          `  ${made.agentToken}`,
          "",
          `serve it: tessera serve --data ${made.dataDir}`,
        ]);
      })
  );
}
