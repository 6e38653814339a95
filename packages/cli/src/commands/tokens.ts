import { TesseraError } from "@tessera/core";
import { Command, InvalidArgumentError } from "commander";
import {
  addPrincipal,
  identityConfigured,
  listPrincipals,
  type PrincipalsFileOptions,
  principalsPath,
  removePrincipal,
} from "../config/principals-file.js";
import { nonEmpty } from "../options.js";
import { printJson, printLines } from "../output.js";

interface RevokeOptions extends PrincipalsFileOptions {
  json?: boolean;
}

interface AddOptions extends PrincipalsFileOptions {
  role: "agent" | "issuer";
  actor: string;
  namespace: string;
  authority: string;
  owner?: string;
  purpose?: string;
  session?: string;
  json?: boolean;
}

/**
 * `tessera tokens revoke <sha256>`: removes the principal holding that token from the
 * principals file, which `tessera serve` reads again on SIGHUP. The file only ever holds
 * digests, so a token is named by its digest (`printf %s "$TOKEN" | sha256sum`).
 */
export function tokensCommand(): Command {
  const revoke = new Command("revoke")
    .description(
      "remove the principal holding a token from the principals file; then send SIGHUP to tessera serve, which refuses the token from its next request",
    )
    .argument("<sha256>", "the token's SHA-256, 64 lowercase hex characters", digest)
    .option("--data <dir>", "a data directory from tessera init (or TESSERA_DATA)", nonEmpty)
    .option(
      "--principals <file>",
      "the principals file itself (or TESSERA_PRINCIPALS); wins over --data",
      nonEmpty,
    )
    .option("--json", "print JSON")
    .action((tokenSha256: string, options: RevokeOptions) => {
      const path = principalsPath(options);
      const removed = removePrincipal(path, tokenSha256, identityConfigured(options));
      if (options.json) {
        printJson({ principals: path, removed: removed.principal, remaining: removed.remaining });
        return;
      }
      const who = removed.principal;
      printLines([
        `tessera tokens revoke: removed ${who.role ?? "agent"} ${who.namespaceId}/${who.actor} (authority ${who.authority}) from ${path}; ${removed.remaining} remain`,
        "  a running tessera serve refuses the token once it reads the file again: kill -HUP <its pid>",
      ]);
    });
  return new Command("tokens")
    .description("manage the bearer tokens of the principals file")
    .addCommand(fileOptions(addCommand()))
    .addCommand(fileOptions(listCommand()))
    .addCommand(revoke);
}

/** `--data` and `--principals`, as every `tokens` command finds the file. */
function fileOptions(command: Command): Command {
  return command
    .option("--data <dir>", "a data directory from tessera init (or TESSERA_DATA)", nonEmpty)
    .option(
      "--principals <file>",
      "the principals file itself (or TESSERA_PRINCIPALS); wins over --data",
      nonEmpty,
    )
    .option("--json", "print JSON");
}

/**
 * `tessera tokens add --actor ID`: mints a token for a new principal (or a second token for one
 * already there: rotate by adding, then revoking the old one) and prints it once; only its
 * digest is written. Namespace and authority default to the file's own when every principal
 * in it agrees on them.
 */
function addCommand(): Command {
  return new Command("add")
    .description(
      "mint a bearer token for a principal and add its digest to the principals file (the token is printed once); then send SIGHUP to tessera serve",
    )
    .requiredOption(
      "--actor <id>",
      "the principal's actor (an agent: the subject its grants name)",
      nonEmpty,
    )
    .option("--role <role>", "agent (decides, sends, A2UI) or issuer (grants)", role, "agent")
    .option("--namespace <id>", "its namespace (default: the file's, when it names one)", nonEmpty)
    .option("--authority <id>", "its authority (default: the file's, when it names one)", nonEmpty)
    .option("--owner <id>", "the owner it acts for", nonEmpty)
    .option("--purpose <id>", "the purpose its decisions carry", nonEmpty)
    .option("--session <id>", "the trusted host session the A2UI gate keys its calls by", nonEmpty)
    .action((options: AddOptions) => {
      const path = principalsPath(options);
      const listed = listPrincipals(path);
      const who = {
        role: options.role,
        namespaceId:
          options.namespace ??
          theOne(
            listed.map((p) => p.namespaceId),
            "--namespace",
          ),
        actor: options.actor,
        authority:
          options.authority ??
          theOne(
            listed.map((p) => p.authority),
            "--authority",
          ),
        ...(options.owner === undefined ? {} : { owner: options.owner }),
        ...(options.purpose === undefined ? {} : { purpose: options.purpose }),
        ...(options.session === undefined ? {} : { session: options.session }),
      };
      const added = addPrincipal(path, who);
      if (options.json) {
        printJson({ principals: path, token: added.token, principal: added.principal });
        return;
      }
      printLines([
        `tessera tokens add: added ${who.role} ${who.namespaceId}/${who.actor} (authority ${who.authority}) to ${path}; ${added.count} principals`,
        "token (shown once; only its SHA-256 is stored, keep it secret):",
        `  ${added.token}`,
        `sha256 ${added.principal.tokenSha256} (what tokens revoke takes)`,
        "  a running tessera serve accepts it once it reads the file again: kill -HUP <its pid>",
      ]);
    });
}

/** `tessera tokens list`: who the file lets in, by token digest; never a token. */
function listCommand(): Command {
  return new Command("list")
    .description("the principals of the principals file, each with its token's SHA-256")
    .action((options: PrincipalsFileOptions & { json?: boolean }) => {
      const path = principalsPath(options);
      const listed = listPrincipals(path);
      if (options.json) {
        printJson({ principals: path, listed });
        return;
      }
      printLines([
        `${listed.length} principal(s) in ${path}`,
        ...listed.map((p) => {
          const extra = [
            p.owner === undefined ? "" : ` owner=${p.owner}`,
            p.purpose === undefined ? "" : ` purpose=${p.purpose}`,
            p.session === undefined ? "" : ` session=${p.session}`,
          ].join("");
          return `  ${p.tokenSha256}  ${(p.role ?? "agent").padEnd(6)} ${p.namespaceId}/${p.actor} authority=${p.authority}${extra}`;
        }),
      ]);
    });
}

function role(raw: string): "agent" | "issuer" {
  if (raw !== "agent" && raw !== "issuer") throw new InvalidArgumentError("agent or issuer");
  return raw;
}

/** The value every principal of the file agrees on; else the flag must say it. */
function theOne(values: readonly string[], flag: string): string {
  const distinct = [...new Set(values)];
  if (distinct.length === 1) return distinct[0] as string;
  throw new TesseraError(
    "invalid_usage",
    distinct.length === 0
      ? `the principals file names no principal to take it from: pass ${flag}`
      : `the principals file names several (${distinct.join(", ")}): pass ${flag}`,
  );
}

function digest(raw: string): string {
  if (!/^[0-9a-f]{64}$/.test(raw)) {
    throw new InvalidArgumentError(
      'expected a SHA-256 as 64 lowercase hex characters (printf %s "$TOKEN" | sha256sum)',
    );
  }
  return raw;
}
