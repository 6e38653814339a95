import { GrantSchema, TesseraError } from "@tessera/core";
import { Command } from "commander";
import { readNamedFile } from "../files.js";
import { nonEmpty } from "../options.js";
import { printJson, printLines } from "../output.js";
import { openStoresByUrl } from "../stores.js";

interface StoreOption {
  store: string;
}

/** Runs `task` against the stores at `url`, closing them on every exit path. */
async function withStores<T>(
  url: string,
  task: (stores: Awaited<ReturnType<typeof openStoresByUrl>>) => Promise<T>,
): Promise<T> {
  const stores = await openStoresByUrl(url);
  try {
    return await task(stores);
  } finally {
    await stores.close();
  }
}

function readGrantFile(path: string): unknown {
  const text = readNamedFile(path, "grant file", "invalid_input");
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new TesseraError("invalid_input", "the grant file is not valid JSON", { cause: error });
  }
}

export function grantsCommand(): Command {
  const grants = new Command("grants").description("issue, revoke and list capability grants");

  grants
    .command("list")
    .description("every grant in a namespace, revoked ones included")
    .requiredOption("--store <url>", "grant store (sqlite:, postgres://, redis://)", nonEmpty)
    .requiredOption("--namespace <id>", "namespace", nonEmpty)
    .option("--json", "print JSON")
    .action(async (options: StoreOption & { namespace: string; json?: boolean }) => {
      const list = await withStores(options.store, (s) =>
        s.grants.listNamespace(options.namespace),
      );
      if (options.json) {
        printJson(list);
        return;
      }
      printLines(
        list.map((g) => {
          const bound =
            g.constraints.maxUses === undefined ? "unbounded" : `maxUses ${g.constraints.maxUses}`;
          const state = g.revokedAt ? `revoked ${g.revokedAt}` : "active";
          return `${g.id}  subject=${g.subject} issuer=${g.issuer} ${bound} ${state}`;
        }),
      );
    });

  grants
    .command("add")
    .description("add a grant from a JSON file (or - for standard input), validated first")
    .requiredOption("--store <url>", "grant store", nonEmpty)
    .requiredOption("--file <path>", "grant JSON", nonEmpty)
    .action(async (options: StoreOption & { file: string }) => {
      const parsed = GrantSchema.safeParse(readGrantFile(options.file));
      if (!parsed.success) {
        throw new TesseraError(
          "invalid_grant",
          `the grant does not match the schema: ${parsed.error.issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`).join("; ")}`,
        );
      }
      const added = await withStores(options.store, (s) => s.grants.add(parsed.data));
      printLines([`added ${added.id} in ${added.namespaceId}`]);
    });

  grants
    .command("revoke")
    .description("revoke one grant; turns already open keep their lease, the next turn sees it")
    .requiredOption("--store <url>", "grant store", nonEmpty)
    .requiredOption("--namespace <id>", "namespace", nonEmpty)
    .requiredOption("--id <grantId>", "grant", nonEmpty)
    .action(async (options: StoreOption & { namespace: string; id: string }) => {
      const revoked = await withStores(options.store, (s) =>
        s.grants.revoke(options.namespace, options.id),
      );
      if (!revoked) throw new TesseraError("invalid_input", "no such grant in that namespace");
      printLines([`revoked ${options.id}`]);
    });

  return grants;
}
