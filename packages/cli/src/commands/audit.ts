import { explain, type ReadableAuditSink, readAuditPages } from "@tessera/core";
import { Command } from "commander";
import { nonEmpty, wholeNumber } from "../options.js";
import { drained, JsonArrayPrinter, printJson, printLines, printList } from "../output.js";
import { auditQueryCommand, auditTailCommand } from "./audit-read.js";
import {
  formatEvent,
  NO_DECISIONS,
  openAudit,
  type PrincipalOptions,
  principalOf,
  type SourceOptions,
  sourceOptions,
} from "./audit-source.js";
import { auditCheckpointCommand, auditKeygenCommand, auditVerifyCommand } from "./audit-verify.js";

/** Events per page of a listing: small enough that the first lines show at once. */
const LIST_PAGE_SIZE = 1_000;

/**
 * The whole trail (or its first `limit` events) printed a page at a time as it is read: the
 * listing of a trail of any length holds one page, and its first lines show at once.
 */
async function listWholeTrail(
  sink: ReadableAuditSink,
  options: { limit?: number; json?: boolean },
): Promise<void> {
  const limit = options.limit ?? Number.POSITIVE_INFINITY;
  const json = options.json === true ? new JsonArrayPrinter() : undefined;
  let printed = 0;
  for await (const page of readAuditPages(sink, { pageSize: Math.min(limit, LIST_PAGE_SIZE) })) {
    const shown = page.slice(0, limit - printed);
    printed += shown.length;
    if (json !== undefined) json.add(shown);
    else printLines(shown.map(formatEvent));
    if (printed === limit) break;
    await drained();
  }
  if (json !== undefined) json.end();
  else if (printed === 0) process.stderr.write(`${NO_DECISIONS}\n`);
}

export function auditCommand(): Command {
  const audit = new Command("audit").description("read the audit trail");

  sourceOptions(audit.command("list", { isDefault: true }).description("decisions, oldest first"))
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
          if (options.callId === undefined && options.traceId === undefined) {
            await listWholeTrail(sink, options);
            return;
          }
          const events = await sink.read({
            ...(options.callId ? { callId: options.callId } : {}),
            ...(options.traceId ? { traceId: options.traceId } : {}),
            ...(options.limit ? { limit: options.limit } : {}),
          });
          if (options.json) printJson(events);
          else printList(events.map(formatEvent), NO_DECISIONS);
        } finally {
          await close();
        }
      },
    );

  sourceOptions(
    audit
      .command("explain <callId>")
      .description('tell "spent" from "never granted" (and revoked, expired, …) for one call'),
    "audit store",
  )
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
