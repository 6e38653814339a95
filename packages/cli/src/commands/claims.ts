import { lstat } from "node:fs/promises";
import { join } from "node:path";
import { DirectoryClaimStore, type SkippedMarker } from "@tessera/a2ui";
import { type ClaimReader, isTesseraError, TesseraError } from "@tessera/core";
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
import { openAuditReaderByUrl, openClaimReaderByUrl, openStoresByUrl } from "../stores.js";

interface ClaimsOptions extends RemoteOptions {
  inDoubt?: boolean;
  dir?: string;
  store?: string;
  session?: string;
  json?: boolean;
  upgrade?: boolean;
}

interface InDoubt {
  readonly session?: string;
  readonly functionCallId: string;
  readonly claimedAt: number;
  readonly worker?: string | undefined;
}

/**
 * A claim directory entry that names no claim (`DirectoryClaimStore.inDoubtReport`'s
 * `skipped`). A `no_record` marker still blocks its call ID, so a listing that left it out
 * would say "0 in doubt" while a call is stuck.
 */
interface Unreadable extends SkippedMarker {
  /** When the entry last changed: what to look for in the audit trail around. */
  readonly modifiedAt?: string;
}

interface InDoubtReport {
  readonly inDoubt: readonly InDoubt[];
  readonly unreadable: readonly Unreadable[];
}

interface LocalClaims {
  report(session: string | undefined): Promise<InDoubtReport>;
  close(): Promise<void>;
}

async function openClaims(options: ClaimsOptions): Promise<LocalClaims> {
  const data = dataDirToRead(options, [options.dir, options.store]);
  if ([options.dir, options.store, data].filter((source) => source !== undefined).length > 1) {
    throw new TesseraError("invalid_usage", "give one of --dir, --store or --data, not several");
  }
  // A data directory's claims are where its service keeps them.
  const { dir, store } = data === undefined ? options : dataDirClaims(data);
  if (options.dir !== undefined && options.upgrade) {
    throw new TesseraError(
      "invalid_usage",
      "a claim directory has no layout to upgrade: --upgrade goes with --store or --data",
    );
  }
  if (dir !== undefined) {
    const claims = await DirectoryClaimStore.open(dir);
    return {
      async report(session) {
        const { inDoubt, skipped } = await claims.inDoubtReport(session);
        return { inDoubt, unreadable: await Promise.all(skipped.map((s) => dated(dir, s))) };
      },
      close: () => claims.close(),
    };
  }
  if (store !== undefined) {
    const claims = await (options.upgrade ? openStoreToUpgrade(store) : openStoreToRead(store));
    return {
      report: async (session) => ({ inDoubt: await claims.listInDoubt(session), unreadable: [] }),
      close: () => claims.close(),
    };
  }
  throw new TesseraError(
    "invalid_config",
    "say where the claims are: a service (--url, --token), --dir DIR, --store URL or --data DIR",
  );
}

/**
 * Opens a store whose claims are only to be listed, writing nothing (core's claim reader): no
 * migration, no self-test, a read-only connection where the backend has one. A store that is
 * not there (a mistyped SQLite path, a database or prefix with no Tessera tables or keys) is
 * `schema_unavailable` rather than created and listed as "0 claim(s) in doubt"; a newer one
 * too; and an older one, left as it is: an old release's instance may still be running on it.
 */
async function openStoreToRead(url: string): Promise<ClaimReader> {
  try {
    return await openClaimReaderByUrl(url);
  } catch (error) {
    // The reader's port code would name the claim port; this command opens the store.
    throw storeCoded(error, "claim_store_unavailable");
  }
}

/**
 * `--upgrade`: the store is checked as a reader first (one that is not there, or is newer, is
 * still refused, not created), then opened as a writer, which migrates an older store in
 * place. What the operator asked for, once every instance of the old release is stopped.
 */
async function openStoreToUpgrade(url: string): Promise<ClaimReader> {
  try {
    const reader = await openAuditReaderByUrl(url);
    await reader.close();
  } catch (error) {
    throw storeCoded(error, "audit_unavailable");
  }
  const stores = await openStoresByUrl(url);
  return {
    get: (key) => stores.claims.get(key),
    listInDoubt: (session) => stores.claims.listInDoubt(session),
    close: () => stores.close(),
  };
}

function storeCoded(error: unknown, portCode: "claim_store_unavailable" | "audit_unavailable") {
  return isTesseraError(error, portCode)
    ? new TesseraError("store_unavailable", error.message, { cause: error })
    : error;
}

async function dated(dir: string, skipped: SkippedMarker): Promise<Unreadable> {
  try {
    const { mtime } = await lstat(join(dir, skipped.marker));
    return { ...skipped, modifiedAt: mtime.toISOString() };
  } catch {
    // Removed since the listing: still worth showing as it was found.
    return skipped;
  }
}

/** What an operator does about an entry that names no claim. */
const UNREADABLE_ADVICE: Record<SkippedMarker["why"], string> = {
  no_record:
    "a claim marker whose record was never written or is torn (its worker died while claiming, or the disk was full): its call ID stays claimed, and a retry of it is refused, but the ID cannot be read. Find the call in the audit trail around the marker's time and decide it by hand like any call in doubt; remove the file only if that call must be allowed to run again",
  not_a_file:
    "not a file (a directory, FIFO, symlink or socket under a marker's name): no claim of this store, but a claim of the key it stands for fails closed. Remove it",
};

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
  if (options.upgrade) {
    throw new TesseraError(
      "invalid_usage",
      "a service's store is its own: --upgrade goes with --store or --data",
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
      .option("--json", "print JSON")
      .option(
        "--upgrade",
        "with --store or --data: open the store as a writer, migrating one an older release left (stop that release's instances first); without it the listing writes nothing and refuses an older store",
      ),
    DATA_READ_HELP,
  ).action(async (options: ClaimsOptions) => {
    if (!options.inDoubt) {
      throw new TesseraError("invalid_usage", "nothing to do: pass --in-doubt");
    }
    const remote = await remoteInDoubt(options);
    const local = remote === undefined ? await openClaims(options) : undefined;
    try {
      const { inDoubt, unreadable }: InDoubtReport =
        remote === undefined
          ? await (local as LocalClaims).report(options.session)
          : { inDoubt: remote, unreadable: [] };
      if (options.json) {
        // One array, as before: an unreadable marker is an entry with `marker` and `why`
        // instead of a key, so a script counting entries counts every blocked call.
        printJson([...inDoubt, ...unreadable]);
        return;
      }
      printLines([
        `${inDoubt.length} claim(s) in doubt: never re-dispatched automatically; decide each by hand.`,
        ...inDoubt.map(
          (claim) =>
            `  ${claim.session === undefined ? "" : `session=${JSON.stringify(claim.session)} `}functionCallId=${JSON.stringify(claim.functionCallId)} claimedAt=${new Date(claim.claimedAt).toISOString()}${claim.worker ? ` worker=${claim.worker}` : ""}`,
        ),
        ...(unreadable.length === 0
          ? []
          : [
              `${unreadable.length} marker(s) that name no claim (of any session):`,
              ...unreadable.map(
                (entry) =>
                  `  marker=${entry.marker} why=${entry.why}${entry.modifiedAt === undefined ? "" : ` modifiedAt=${entry.modifiedAt}`}: ${UNREADABLE_ADVICE[entry.why]}`,
              ),
            ]),
      ]);
    } finally {
      await local?.close();
    }
  });
}
