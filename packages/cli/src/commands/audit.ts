import { existsSync } from "node:fs";
import {
  type AuditEvent,
  type ExplainPrincipal,
  explain,
  JsonlAuditSink,
  type ReadableAuditSink,
  TesseraError,
} from "@tessera/core";
import { Command } from "commander";
import { nonEmpty, wholeNumber } from "../options.js";
import { printJson, printLines } from "../output.js";
import { openStoresByUrl } from "../stores.js";
import { auditQueryCommand, auditTailCommand } from "./audit-read.js";
import { auditCheckpointCommand, auditKeygenCommand, auditVerifyCommand } from "./audit-verify.js";

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
      throw new TesseraError("audit_unavailable", "no audit log at that path");
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

export function auditCommand(): Command {
  const audit = new Command("audit").description("read the audit trail");

  audit
    .command("list", { isDefault: true })
    .description("decisions, oldest first")
    .option("--store <url>", "audit store (sqlite:, postgres://, redis://)", nonEmpty)
    .option("--file <path>", "a JSON-lines audit log", nonEmpty)
    .option("--call-id <id>", "only this call", nonEmpty)
    .option("--trace-id <id>", "only this trace", nonEmpty)
    .option("--limit <n>", "at most this many", wholeNumber(1, 1_000_000))
    .option("--json", "print JSON")
    .action(
      async (
        options: SourceOptions & {
          callId?: string;
          traceId?: string;
          limit?: number;
          json?: boolean;
        },
      ) => {
        const { audit: sink, close } = await openAudit(options);
        try {
          const events = await sink.read({
            ...(options.callId ? { callId: options.callId } : {}),
            ...(options.traceId ? { traceId: options.traceId } : {}),
            ...(options.limit ? { limit: options.limit } : {}),
          });
          if (options.json) printJson(events);
          else printLines(events.map(formatEvent));
        } finally {
          await close();
        }
      },
    );

  audit
    .command("explain <callId>")
    .description('tell "spent" from "never granted" (and revoked, expired, …) for one call')
    .option("--store <url>", "audit store", nonEmpty)
    .option("--file <path>", "a JSON-lines audit log", nonEmpty)
    .option("--namespace <id>", "only this principal's decisions: its namespace", nonEmpty)
    .option("--actor <id>", "… its actor", nonEmpty)
    .option("--authority <id>", "… its authority", nonEmpty)
    .option("--owner <id>", "… its owner (leave out for a principal without one)", nonEmpty)
    .option("--json", "print JSON")
    .action(
      async (callId: string, options: SourceOptions & PrincipalOptions & { json?: boolean }) => {
        const principal = principalOf(options);
        const { audit: sink, close } = await openAudit(options);
        try {
          const explanation = await explain(sink, callId, principal);
          if (options.json) printJson(explanation);
          else printLines([`${explanation.verdict}: ${explanation.summary}`]);
        } finally {
          await close();
        }
      },
    );

  audit.addCommand(auditQueryCommand()).addCommand(auditTailCommand());
  audit
    .addCommand(auditVerifyCommand())
    .addCommand(auditCheckpointCommand())
    .addCommand(auditKeygenCommand());
  return audit;
}
