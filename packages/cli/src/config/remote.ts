import { createTesseraClient, type TesseraClient } from "@tessera/client";
import { TesseraError } from "@tessera/core";
import type { Command } from "commander";
import { nonEmpty } from "../options.js";
import { dataDirFromEnv } from "./env.js";
import { loadClientTarget } from "./load.js";

/** The options every command that can talk to a running service takes. */
export interface RemoteOptions {
  url?: string;
  token?: string;
  data?: string;
}

export function withRemoteOptions(
  command: Command,
  dataHelp = "a data directory whose tessera.json names the service (or TESSERA_DATA)",
): Command {
  return command
    .option("--url <url>", "the service (or TESSERA_URL; or the one --data configures)", nonEmpty)
    .option(
      "--token <token>",
      "bearer token (prefer TESSERA_TOKEN: a flag shows in the process list)",
      nonEmpty,
    )
    .option("--data <dir>", dataHelp, nonEmpty);
}

/** `--data`'s help where a data directory is read where it is kept unless a token is given. */
export const DATA_READ_HELP =
  "a data directory (or TESSERA_DATA): its store, read directly; its service when a token is given";

/**
 * The data directory to read where it is kept, for a command that reads either a service or a
 * store (`local`: its store and file flags): one named (`--data`, else `TESSERA_DATA`) while nothing names a service (no
 * `--url`/`--token`, no `TESSERA_URL`/`TESSERA_TOKEN`). With a token, the directory names its
 * service instead (`loadClientTarget`): an operator on the store's machine needs no token and
 * no running service to read its trail.
 */
export function dataDirToRead(
  options: RemoteOptions,
  local: readonly (string | undefined)[],
  env: Readonly<Record<string, string | undefined>> = process.env,
): string | undefined {
  const service = [options.url, options.token, env.TESSERA_URL, env.TESSERA_TOKEN];
  if (service.some((value) => value !== undefined && value !== "")) return undefined;
  // Beside a named store or file, `TESSERA_DATA` gives way, and a `--data` flag is a second
  // source that the opener refuses.
  if (local.some((value) => value !== undefined)) return options.data;
  return options.data ?? dataDirFromEnv(env);
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
