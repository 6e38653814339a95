import { existsSync } from "node:fs";
import {
  type AuditEvent,
  type ExplainPrincipal,
  JsonlAuditSink,
  type ReadableAuditSink,
  TesseraError,
} from "@tessera/core";
import { openStoresByUrl } from "../stores.js";

/**
 * What the audit commands share: where the trail is read from, whose decisions, and how one
 * event prints. A file of its own, importing none of the commands, so `audit.ts` can import
 * the commands that use it without a circle.
 */

export interface SourceOptions {
  store?: string;
  file?: string;
}

export interface PrincipalOptions {
  namespace?: string;
  actor?: string;
  authority?: string;
  owner?: string;
}

/** Opens the audit trail to read: a store's sink, or a JSON-lines file that must exist. */
export async function openAudit(
  options: SourceOptions,
): Promise<{ audit: ReadableAuditSink; close(): Promise<void> }> {
  if (options.store && options.file) {
    throw new TesseraError("invalid_config", "give either --store or --file, not both");
  }
  if (options.file) {
    // Reading must never create the log it was asked to read.
    if (!existsSync(options.file)) {
      throw new TesseraError("file_not_found", `no audit log at ${options.file}`);
    }
    const audit = JsonlAuditSink.open(options.file);
    return { audit, close: async () => audit.close() };
  }
  if (options.store) {
    const stores = await openStoresByUrl(options.store);
    return { audit: stores.audit, close: () => stores.close() };
  }
  throw new TesseraError("invalid_config", "say where the audit is: --store URL or --file PATH");
}

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
