import { existsSync } from "node:fs";
import {
  type AuditEvent,
  type ExplainPrincipal,
  JsonlAuditSink,
  type ReadableAuditSink,
  TesseraError,
} from "@tessera/core";
import type { Command } from "commander";
import { dataDirFromEnv } from "../config/env.js";
import { dataDirStore } from "../config/load.js";
import { nonEmpty } from "../options.js";
import { openAuditReaderByUrl } from "../stores.js";

/**
 * What the audit commands share: where the trail is read from, whose decisions, and how one
 * event prints. A file of its own, importing none of the commands, so `audit.ts` can import
 * the commands that use it without a circle.
 */

export interface SourceOptions {
  store?: string;
  file?: string;
  /** A data directory (`tessera init`): its store. Only where `sourceOptions` declared it. */
  data?: string;
}

/**
 * `--store`, `--file` and `--data` for the commands that read a trail only where it is kept
 * (list, explain, verify, checkpoint); `TESSERA_DATA` stands for `--data` when none is given.
 */
export function sourceOptions(
  command: Command,
  storeHelp = "audit store (sqlite:, postgres://, redis://)",
): Command {
  return command
    .option("--store <url>", storeHelp, nonEmpty)
    .option("--file <path>", "a JSON-lines audit log", nonEmpty)
    .option(
      "--data <dir>",
      "a data directory (tessera init): its store, as serve opens it (or TESSERA_DATA)",
      nonEmpty,
    );
}

export interface PrincipalOptions {
  namespace?: string;
  actor?: string;
  authority?: string;
  owner?: string;
}

/**
 * Opens the audit trail to read: a store's sink (named, or a data directory's), or a JSON-lines
 * file that must exist. `env` supplies `TESSERA_DATA` when no source is given.
 */
export async function openAudit(
  options: SourceOptions,
  env: Readonly<Record<string, string | undefined>> = process.env,
): Promise<{ audit: ReadableAuditSink; close(): Promise<void> }> {
  const given = [options.store, options.file, options.data].filter((v) => v !== undefined);
  if (given.length > 1) {
    throw new TesseraError("invalid_usage", "give one of --store, --file or --data, not several");
  }
  const data = given.length === 0 ? dataDirFromEnv(env) : options.data;
  // A store is opened to be read, writing nothing: an auditor's read-only role serves it.
  if (data !== undefined) {
    const audit = await openAuditReaderByUrl(dataDirStore(data));
    return { audit, close: () => audit.close() };
  }
  if (options.file) {
    // Reading must never create the log it was asked to read.
    if (!existsSync(options.file)) {
      throw new TesseraError("file_not_found", `no audit log at ${options.file}`);
    }
    // To read only: a log the operator may read but not write is listed and verified as well.
    const audit = JsonlAuditSink.openToRead(options.file);
    return { audit, close: async () => audit.close() };
  }
  if (options.store) {
    const audit = await openAuditReaderByUrl(options.store);
    return { audit, close: () => audit.close() };
  }
  throw new TesseraError(
    "invalid_config",
    "say where the audit is: --store URL, --file PATH or --data DIR (or TESSERA_DATA)",
  );
}

/** What a text listing of decisions says (on stderr) when it has none to show. */
export const NO_DECISIONS = "no decisions found: the trail is empty, or none match";

/**
 * The principal named by the flags, or none (explain then answers as core does). A principal
 * is all of namespace, actor and authority, with its owner if it has one; half of one would
 * read another principal's decisions as if they were its own.
 */
export function principalOf(options: PrincipalOptions): ExplainPrincipal | undefined {
  const { namespace, actor, authority, owner } = options;
  if ([namespace, actor, authority, owner].every((part) => part === undefined)) return undefined;
  if (namespace === undefined || actor === undefined || authority === undefined) {
    throw new TesseraError(
      "invalid_usage",
      "name the whole principal: --namespace, --actor and --authority (and --owner if it has one)",
    );
  }
  const principal = { namespaceId: namespace, actor, authority };
  return owner === undefined ? principal : { ...principal, owner };
}

export function formatEvent(event: AuditEvent): string {
  const who = event.actor
    ? ` actor=${event.actor}`
    : event.session
      ? ` session=${event.session}`
      : "";
  const grant = event.grantId ? ` grant=${event.grantId}` : "";
  const code = event.code ? ` code=${event.code}` : "";
  return `${event.at} ${event.source} ${event.outcome.padEnd(7)} ${event.reason}${code}${who}${grant} call=${event.callId}`;
}
