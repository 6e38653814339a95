import { DirectoryClaimStore } from "@tessera/a2ui";
import { type ClaimStore, TesseraError } from "@tessera/core";
import { Command } from "commander";
import { dataDirClaims } from "../config/load.js";
import {
  DATA_READ_HELP,
  dataDirToRead,
  oneSource,
  type RemoteOptions,
  remoteClient,
  withRemoteOptions,
} from "../config/remote.js";
import { nonEmpty } from "../options.js";
import { printJson, printLines } from "../output.js";
import { openStoresByUrl } from "../stores.js";

interface ClaimsOptions extends RemoteOptions {
  inDoubt?: boolean;
  dir?: string;
  store?: string;
  session?: string;
  json?: boolean;
}

async function openClaims(
  options: ClaimsOptions,
): Promise<{ claims: ClaimStore; close(): Promise<void> }> {
  const data = dataDirToRead(options, [options.dir, options.store]);
  if ([options.dir, options.store, data].filter((source) => source !== undefined).length > 1) {
    throw new TesseraError("invalid_usage", "give one of --dir, --store or --data, not several");
  }
  // A data directory's claims are where its service keeps them.
  const { dir, store } = data === undefined ? options : dataDirClaims(data);
  if (dir !== undefined) {
    const claims = await DirectoryClaimStore.open(dir);
    return { claims, close: () => claims.close() };
  }
  if (store !== undefined) return openStoresByUrl(store);
  throw new TesseraError(
    "invalid_config",
    "say where the claims are: a service (--url, --token), --dir DIR, --store URL or --data DIR",
  );
}

interface InDoubt {
  readonly session?: string;
  readonly functionCallId: string;
  readonly claimedAt: number;
  readonly worker?: string | undefined;
}

/** From a service: the token's own session's claims; the session is never named on the wire. */
async function remoteInDoubt(options: ClaimsOptions): Promise<readonly InDoubt[] | undefined> {
  const local = [options.dir, options.store];
  oneSource(options, local);
  // A store, a claim directory, or a data directory read where it is kept: not the service.
  if (local.some((given) => given !== undefined) || dataDirToRead(options, local) !== undefined) {
    return undefined;
  }
  const client = remoteClient(options);
  if (client === undefined) return undefined;
  if (options.session !== undefined) {
    throw new TesseraError(
      "invalid_usage",
      "a service lists the token's own session: --session goes with --dir, --store or --data",
    );
  }
  return (await client.inDoubtClaims()).claims;
}

export function claimsCommand(): Command {
  return withRemoteOptions(
    new Command("claims")
      .description("inspect A2UI function-call claims")
      .option("--in-doubt", "list claims whose worker died between claim and outcome")
      .option("--dir <dir>", "a private claim directory", nonEmpty)
      .option("--store <url>", "a shared claim store (sqlite:, postgres://, redis://)", nonEmpty)
      .option("--session <session>", "only this trusted host session", nonEmpty)
      .option("--json", "print JSON"),
    DATA_READ_HELP,
  ).action(async (options: ClaimsOptions) => {
    if (!options.inDoubt) {
      throw new TesseraError("invalid_usage", "nothing to do: pass --in-doubt");
    }
    const remote = await remoteInDoubt(options);
    const local = remote === undefined ? await openClaims(options) : undefined;
    try {
      const inDoubt: readonly InDoubt[] =
        remote ??
        (await (local as Awaited<ReturnType<typeof openClaims>>).claims.listInDoubt(
          options.session,
        ));
      if (options.json) {
        printJson(inDoubt);
        return;
      }
      printLines([
        `${inDoubt.length} claim(s) in doubt: never re-dispatched automatically; decide each by hand.`,
        ...inDoubt.map(
          (claim) =>
            `  ${claim.session === undefined ? "" : `session=${JSON.stringify(claim.session)} `}functionCallId=${JSON.stringify(claim.functionCallId)} claimedAt=${new Date(claim.claimedAt).toISOString()}${claim.worker ? ` worker=${claim.worker}` : ""}`,
        ),
      ]);
    } finally {
      await local?.close();
    }
  });
}
