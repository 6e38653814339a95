import { createTesseraClient, type TesseraClient } from "@tessera/client";
import { TesseraError } from "@tessera/core";
import type { Command } from "commander";
import { nonEmpty } from "../options.js";
import { loadClientTarget } from "./load.js";

/** The options every command that can talk to a running service takes. */
export interface RemoteOptions {
  url?: string;
  token?: string;
  data?: string;
}

export function withRemoteOptions(command: Command): Command {
  return command
    .option("--url <url>", "the service (or TESSERA_URL; or the one --data configures)", nonEmpty)
    .option(
      "--token <token>",
      "bearer token (prefer TESSERA_TOKEN: a flag shows in the process list)",
      nonEmpty,
    )
    .option(
      "--data <dir>",
      "a data directory whose tessera.json names the service (or TESSERA_DATA)",
      nonEmpty,
    );
}

/** The client the options, environment or data directory name; undefined when none does. */
export function remoteClient(options: RemoteOptions): TesseraClient | undefined {
  const target = loadClientTarget(options);
  return target === undefined ? undefined : createTesseraClient(target);
}

/** As `remoteClient`, for commands that only run against a service. */
export function requireRemote(options: RemoteOptions, what: string): TesseraClient {
  const client = remoteClient(options);
  if (client === undefined) {
    throw new TesseraError(
      "invalid_config",
      `${what} runs against a service: pass --url and --token (or TESSERA_URL and TESSERA_TOKEN)`,
    );
  }
  return client;
}

/** A store option and a service option together name two sources: refuse rather than guess. */
export function oneSource(options: RemoteOptions, local: readonly (string | undefined)[]): void {
  const remote = options.url !== undefined || options.token !== undefined;
  if (remote && local.some((value) => value !== undefined)) {
    throw new TesseraError(
      "invalid_usage",
      "give either a service (--url, --token) or a local store, not both",
    );
  }
}
