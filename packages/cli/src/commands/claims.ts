import { DirectoryClaimStore } from "@tessera/a2ui";
import { type ClaimStore, TesseraError } from "@tessera/core";
import { Command } from "commander";
import { nonEmpty } from "../options.js";
import { printJson, printLines } from "../output.js";
import { openStoresByUrl } from "../stores.js";

interface ClaimsOptions {
  inDoubt?: boolean;
  dir?: string;
  store?: string;
  session?: string;
  json?: boolean;
}

async function openClaims(
  options: ClaimsOptions,
): Promise<{ claims: ClaimStore; close(): Promise<void> }> {
  if (options.dir && options.store) {
    throw new TesseraError("invalid_config", "give either --dir or --store, not both");
  }
  if (options.dir) {
    const claims = await DirectoryClaimStore.open(options.dir);
    return { claims, close: () => claims.close() };
  }
  if (options.store) return openStoresByUrl(options.store);
  throw new TesseraError("invalid_config", "say where the claims are: --dir DIR or --store URL");
}

export function claimsCommand(): Command {
  return new Command("claims")
    .description("inspect A2UI function-call claims")
    .option("--in-doubt", "list claims whose worker died between claim and outcome")
    .option("--dir <dir>", "a private claim directory", nonEmpty)
    .option("--store <url>", "a shared claim store (sqlite:, postgres://, redis://)", nonEmpty)
    .option("--session <session>", "only this trusted host session", nonEmpty)
    .option("--json", "print JSON")
    .action(async (options: ClaimsOptions) => {
      if (!options.inDoubt) {
        throw new TesseraError("invalid_config", "nothing to do: pass --in-doubt");
      }
      const { claims, close } = await openClaims(options);
      try {
        const inDoubt = await claims.listInDoubt(options.session);
        if (options.json) {
          printJson(inDoubt);
          return;
        }
        printLines([
          `${inDoubt.length} claim(s) in doubt: never re-dispatched automatically; decide each by hand.`,
          ...inDoubt.map(
            (claim) =>
              `  session=${JSON.stringify(claim.session)} functionCallId=${JSON.stringify(claim.functionCallId)} claimedAt=${new Date(claim.claimedAt).toISOString()}${claim.worker ? ` worker=${claim.worker}` : ""}`,
          ),
        ]);
      } finally {
        await close();
      }
    });
}
