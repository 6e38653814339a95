import { explain, TesseraError } from "@tessera/core";
import { Command } from "commander";
import {
  DATA_READ_HELP,
  dataDirToRead,
  oneSource,
  type RemoteOptions,
  requireRemote,
  withRemoteOptions,
} from "../config/remote.js";
import { nonEmpty } from "../options.js";
import { printJson, printLines } from "../output.js";
import {
  openAudit,
  type PrincipalOptions,
  principalOf,
  type SourceOptions,
} from "./audit-source.js";

type ExplainOptions = SourceOptions & PrincipalOptions & RemoteOptions & { json?: boolean };

/**
 * `tessera explain CALL_ID`: from a service, for the token's own principal (a foreign or unknown
 * call ID answers alike); from a store or log, for the principal the flags name, or any.
 */
export function explainCommand(): Command {
  return withRemoteOptions(
    new Command("explain")
      .description('tell "spent" from "never granted" (and revoked, expired, …) for one call')
      .argument("<callId>", "the call ID the decision was taken under")
      .option("--store <url>", "audit store, read directly", nonEmpty)
      .option("--file <path>", "a JSON-lines audit log", nonEmpty)
      .option(
        "--namespace <id>",
        "with --store, --file or --data: only this principal's decisions",
        nonEmpty,
      )
      .option("--actor <id>", "… its actor", nonEmpty)
      .option("--authority <id>", "… its authority", nonEmpty)
      .option("--owner <id>", "… its owner (leave out for a principal without one)", nonEmpty)
      .option("--json", "print JSON"),
    DATA_READ_HELP,
  ).action(async (callId: string, options: ExplainOptions) => {
    oneSource(options, [
      options.store,
      options.file,
      options.namespace,
      options.actor,
      options.authority,
      options.owner,
    ]);
    const data = dataDirToRead(options, [options.store, options.file]);
    if (options.store === undefined && options.file === undefined && data === undefined) {
      const principalFlag = [options.namespace, options.actor, options.authority, options.owner];
      if (principalFlag.some((flag) => flag !== undefined)) {
        throw new TesseraError(
          "invalid_usage",
          "a service explains for the token's own principal: principal flags go with --store, --file or --data",
        );
      }
      const explanation = await requireRemote(
        options,
        "explain without --store, --file or --data",
      ).explain(callId);
      if (options.json) printJson(explanation);
      else printLines([`${explanation.verdict}: ${explanation.summary}`]);
      return;
    }
    const principal = principalOf(options);
    const { audit, close } = await openAudit({ store: options.store, file: options.file, data });
    try {
      const explanation = await explain(audit, callId, principal);
      if (options.json) printJson(explanation);
      else printLines([`${explanation.verdict}: ${explanation.summary}`]);
    } finally {
      await close();
    }
  });
}
