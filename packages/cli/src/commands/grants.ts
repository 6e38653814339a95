import { randomUUID } from "node:crypto";
import {
  addDerivedGrant,
  type DerivationRequest,
  deriveGrant,
  type Grant,
  GrantSchema,
  TesseraError,
} from "@tessera/core";
import { IssueGrantRequestSchema } from "@tessera/core/http";
import { Command } from "commander";
import {
  oneSource,
  type RemoteOptions,
  requireRemote,
  withRemoteOptions,
} from "../config/remote.js";
import { readNamedFile } from "../files.js";
import { nonEmpty } from "../options.js";
import { printJson, printLines, printList } from "../output.js";
import { openExistingStoresByUrl, openStoresByUrl } from "../stores.js";

interface StoreOption {
  store: string;
}

interface LocalOptions {
  store?: string;
  namespace?: string;
}

/**
 * A service answers for the issuer token's namespace, so a --namespace without --store would
 * be silently ignored: refuse it, as a service and a store named together are refused.
 */
function localOrRemote(options: LocalOptions & RemoteOptions): void {
  // Before the general rule, which would call a lone --namespace "a local store".
  if (options.store === undefined && options.namespace !== undefined) {
    throw new TesseraError(
      "invalid_usage",
      "--namespace goes with --store: a service answers for the issuer token's own namespace",
    );
  }
  oneSource(options, [options.store, options.namespace]);
}

function requireNamespace(options: LocalOptions): string {
  if (options.namespace === undefined) {
    throw new TesseraError("invalid_usage", "with --store, say which namespace: --namespace ID");
  }
  return options.namespace;
}

function formatGrant(grant: Grant, uses?: number, now = Date.now()): string {
  const bound =
    grant.constraints.maxUses === undefined ? "unbounded" : `maxUses ${grant.constraints.maxUses}`;
  const used = uses === undefined ? "" : ` used ${uses}`;
  return `${grant.id}  subject=${grant.subject} issuer=${grant.issuer} ${bound}${used} ${stateOf(grant, uses, now)}`;
}

/**
 * Whether the grant counts now, by the kernel's rules for the grant alone (its window as the
 * kernel reads it: from its issue time or `notBefore`, whichever is later, until `expiresAt`),
 * so an operator never reads "active" on a grant every decision would refuse. A derived grant
 * also answers to its chain, which this line does not walk.
 */
function stateOf(grant: Grant, uses: number | undefined, now: number): string {
  if (grant.revokedAt) return `revoked ${grant.revokedAt}`;
  const { expiresAt, notBefore, maxUses } = grant.constraints;
  if (expiresAt !== undefined && now >= Date.parse(expiresAt)) return `expired ${expiresAt}`;
  const from =
    notBefore !== undefined && Date.parse(notBefore) > Date.parse(grant.issuedAt)
      ? notBefore
      : grant.issuedAt;
  if (now < Date.parse(from)) return `not valid before ${from}`;
  if (maxUses !== undefined && uses !== undefined && uses >= maxUses) return "spent";
  return "active";
}

function describe(issues: readonly { path: readonly PropertyKey[]; message: string }[]): string {
  return issues.map((i) => `${i.path.map(String).join(".") || "(root)"}: ${i.message}`).join("; ");
}

/**
 * Runs `task` against the stores at `url`, closing them on every exit path. `existing` names
 * a command that only works on what a store holds: a URL naming no store is refused then,
 * never made into an empty one (`openExistingStoresByUrl`).
 */
async function withStores<T>(
  url: string,
  task: (stores: Awaited<ReturnType<typeof openStoresByUrl>>) => Promise<T>,
  existing?: string,
): Promise<T> {
  const stores =
    existing === undefined
      ? await openStoresByUrl(url)
      : await openExistingStoresByUrl(url, existing);
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

interface AddOptions extends StoreOption {
  file: string;
  namespace?: string;
  issuer?: string;
  json?: boolean;
}

/**
 * What `grants issue` gets from the service (a fresh id, now, the token's namespace and
 * issuer), `grants add` takes from the flags and the clock, for the fields the file leaves
 * out. A field given both ways must agree: a flag never silently loses to the file.
 */
function completeGrant(raw: unknown, options: AddOptions): unknown {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return raw;
  const grant = { ...(raw as Record<string, unknown>) };
  for (const [field, flag, value] of [
    ["namespaceId", "--namespace", options.namespace],
    ["issuer", "--issuer", options.issuer],
  ] as const) {
    if (grant[field] === undefined) {
      if (value === undefined) {
        throw new TesseraError(
          "invalid_usage",
          `the grant file has no ${field}: give it in the file or with ${flag}`,
        );
      }
      grant[field] = value;
    } else if (value !== undefined && grant[field] !== value) {
      throw new TesseraError(
        "invalid_usage",
        `${flag} ${value} disagrees with the file's ${field} ${JSON.stringify(grant[field])}`,
      );
    }
  }
  grant.id ??= randomUUID();
  grant.issuedAt ??= new Date().toISOString();
  return grant;
}

export function grantsCommand(): Command {
  const grants = new Command("grants").description("issue, revoke and list capability grants");

  withRemoteOptions(
    grants
      .command("list")
      .description(
        "every grant in a namespace, revoked ones included: from a service (the issuer token's namespace, with usage counts) or a store",
      )
      .option("--store <url>", "grant store (sqlite:, postgres://, redis://)", nonEmpty)
      .option("--namespace <id>", "namespace (with --store)", nonEmpty)
      .option("--json", "print JSON"),
  ).action(async (options: LocalOptions & RemoteOptions & { json?: boolean }) => {
    localOrRemote(options);
    if (options.store === undefined) {
      const { grants: list } = await requireRemote(
        options,
        "grants list without --store",
      ).listGrants();
      if (options.json) printJson(list);
      else
        printList(
          list.map(({ grant, uses }) => formatGrant(grant, uses)),
          "no grants in the token's namespace",
        );
      return;
    }
    const namespace = requireNamespace(options);
    // A bounded grant's uses, read beside it, as a service lists them: is the ticket spent?
    const listed = await withStores(
      options.store,
      async (s) => {
        const all = await s.grants.listNamespace(namespace);
        return Promise.all(
          all.map(async (grant) => ({
            grant,
            uses:
              grant.constraints.maxUses === undefined
                ? undefined
                : await s.usage.getUsage(namespace, grant.id),
          })),
        );
      },
      "grants list",
    );
    if (options.json) printJson(listed.map(({ grant }) => grant));
    else
      printList(
        listed.map(({ grant, uses }) => formatGrant(grant, uses)),
        `no grants in namespace ${namespace}`,
      );
  });

  withRemoteOptions(
    grants
      .command("issue")
      .description(
        "issue a grant through a service, from a JSON file (or - for standard input); its namespace and issuer are the issuer token's",
      )
      .requiredOption(
        "--file <path>",
        "grant request JSON: { subject, capabilities, constraints?, id? }",
        nonEmpty,
      )
      .option("--json", "print JSON"),
  ).action(async (options: RemoteOptions & { file: string; json?: boolean }) => {
    const parsed = IssueGrantRequestSchema.safeParse(readGrantFile(options.file));
    if (!parsed.success) {
      throw new TesseraError(
        "invalid_grant",
        `the grant request does not match the schema: ${describe(parsed.error.issues)}`,
      );
    }
    const { grant } = await requireRemote(options, "grants issue").issueGrant(parsed.data);
    if (options.json) printJson(grant);
    else printLines([`issued ${grant.id} in ${grant.namespaceId} to ${grant.subject}`]);
  });

  grants
    .command("add")
    .description(
      "add a grant to a store from a JSON file (or - for standard input), validated first; id and issuedAt default to a fresh UUID and now, namespaceId and issuer to --namespace and --issuer",
    )
    .requiredOption("--store <url>", "grant store", nonEmpty)
    .requiredOption(
      "--file <path>",
      "grant JSON: { subject, capabilities, constraints?, id?, issuedAt?, namespaceId?, issuer? }",
      nonEmpty,
    )
    .option("--namespace <id>", "the grant's namespaceId when the file has none", nonEmpty)
    .option("--issuer <id>", "the grant's issuer when the file has none", nonEmpty)
    .option("--json", "print JSON")
    .action(async (options: AddOptions) => {
      const parsed = GrantSchema.safeParse(completeGrant(readGrantFile(options.file), options));
      if (!parsed.success) {
        throw new TesseraError(
          "invalid_grant",
          `the grant does not match the schema: ${describe(parsed.error.issues)}`,
        );
      }
      const added = await withStores(options.store, (s) => s.grants.add(parsed.data));
      if (options.json) printJson(added);
      else printLines([`added ${added.id} in ${added.namespaceId}`]);
    });

  grants
    .command("derive")
    .description(
      "derive a narrower grant for a delegate from a parent grant the delegator holds; refused (never clamped) when any axis widens, and a bounded child's uses are carved out of its parent",
    )
    .requiredOption("--store <url>", "grant and usage store", nonEmpty)
    .requiredOption("--namespace <id>", "namespace of the parent grant", nonEmpty)
    .requiredOption("--parent <grantId>", "the grant to derive from", nonEmpty)
    .requiredOption("--issuer <actor>", "the delegator: the parent's subject", nonEmpty)
    .requiredOption(
      "--file <path>",
      "derivation request JSON: { id, subject, capabilities, constraints?, issuedAt? }",
      nonEmpty,
    )
    .option("--json", "print JSON")
    .action(
      async (
        options: StoreOption & {
          namespace: string;
          parent: string;
          issuer: string;
          file: string;
          json?: boolean;
        },
      ) => {
        const request = readGrantFile(options.file) as DerivationRequest;
        const child = await withStores(
          options.store,
          async (s) => {
            const parent = (await s.grants.listNamespace(options.namespace)).find(
              (grant) => grant.id === options.parent,
            );
            if (parent === undefined) {
              throw new TesseraError("invalid_input", "no such parent grant in that namespace");
            }
            const derived = deriveGrant(parent, request, { issuer: options.issuer });
            // Spent before the child exists: a crash in between loses uses, never gains any; a
            // child the store refuses (its ID taken) gets them given back.
            return addDerivedGrant(s.grants, s.usage, parent, derived);
          },
          "grants derive",
        );
        if (options.json) printJson(child);
        else {
          printLines([
            `derived ${child.id} from ${options.parent} for ${child.subject} (depth ${child.depth ?? 1})`,
          ]);
        }
      },
    );

  withRemoteOptions(
    grants
      .command("revoke")
      .description("revoke one grant; turns already open keep their lease, the next turn sees it")
      .option("--store <url>", "grant store (else the service's, for an issuer token)", nonEmpty)
      .option("--namespace <id>", "namespace (with --store)", nonEmpty)
      .requiredOption("--id <grantId>", "grant", nonEmpty)
      .option("--json", "print JSON"),
  ).action(async (options: LocalOptions & RemoteOptions & { id: string; json?: boolean }) => {
    localOrRemote(options);
    let revoked: boolean;
    if (options.store === undefined) {
      ({ revoked } = await requireRemote(options, "grants revoke without --store").revokeGrant(
        options.id,
      ));
    } else {
      const namespace = requireNamespace(options);
      const store = options.store;
      revoked = await withStores(
        store,
        (s) => s.grants.revoke(namespace, options.id),
        "grants revoke",
      );
    }
    if (!revoked) throw new TesseraError("invalid_input", "no such grant in that namespace");
    if (options.json) printJson({ revoked: options.id });
    else printLines([`revoked ${options.id}`]);
  });

  return grants;
}
