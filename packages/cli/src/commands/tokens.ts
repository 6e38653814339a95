import { randomBytes } from "node:crypto";
import {
  closeSync,
  fsyncSync,
  openSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeSync,
} from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { TesseraError } from "@tessera/core";
import { parsePrincipals } from "@tessera/server";
import { Command, InvalidArgumentError } from "commander";
import { checkDataDir, PRIVATE_FILE_MODE } from "../config/data-dir.js";
import { readConfigFile } from "../config/load.js";
import { nonEmpty } from "../options.js";
import { printJson, printLines } from "../output.js";

interface RevokeOptions {
  data?: string;
  principals?: string;
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
    .addCommand(revoke);
}

function digest(raw: string): string {
  if (!/^[0-9a-f]{64}$/.test(raw)) {
    throw new InvalidArgumentError(
      'expected a SHA-256 as 64 lowercase hex characters (printf %s "$TOKEN" | sha256sum)',
    );
  }
  return raw;
}

/** `--principals`, else `TESSERA_PRINCIPALS`, else the data directory's `principals` key. */
function principalsPath(options: RevokeOptions): string {
  const named = options.principals ?? nonEmptyEnv("TESSERA_PRINCIPALS");
  if (named !== undefined) return resolve(named);
  const data = options.data ?? nonEmptyEnv("TESSERA_DATA");
  if (data === undefined) {
    throw new TesseraError(
      "invalid_config",
      "say which principals file: --data DIR, --principals FILE or TESSERA_PRINCIPALS",
    );
  }
  const dir = checkDataDir(data);
  return resolve(dir, readConfigFile(dir).principals);
}

/**
 * Whether the service also takes its identity provider's JWTs (`TESSERA_IDENTITY`, or
 * `identity` in the data directory's tessera.json), as `tessera serve` finds it: then it runs
 * with no static principal, and the last one may go.
 */
function identityConfigured(options: RevokeOptions): boolean {
  if (nonEmptyEnv("TESSERA_IDENTITY") !== undefined) return true;
  const data = options.data ?? nonEmptyEnv("TESSERA_DATA");
  return data !== undefined && readConfigFile(checkDataDir(data)).identity !== undefined;
}

function nonEmptyEnv(name: string): string | undefined {
  const value = process.env[name];
  if (value === "") throw new TesseraError("invalid_config", `${name} is set but empty`);
  return value;
}

interface FilePrincipal {
  tokenSha256: string;
  namespaceId: string;
  actor: string;
  authority: string;
  role?: string;
}

/**
 * Rewrites the file without the principal, atomically (a temporary file beside it, synced,
 * then renamed over it): a serve reading it on SIGHUP sees the old file or the new one, never
 * half of one. Refused, and nothing written, when no principal holds the token, or it is the
 * last one and the service has no identity provider (a serve would keep the old set instead).
 */
function removePrincipal(
  path: string,
  tokenSha256: string,
  mayEmpty: boolean,
): { principal: Omit<FilePrincipal, "tokenSha256">; remaining: number } {
  const raw = readJson(path);
  // The whole file must check before it is rewritten: an edit never turns a file the
  // service refuses into one it accepts by accident, or the reverse.
  parsePrincipals(raw);
  const listed = (raw as { principals: FilePrincipal[] }).principals;
  const kept = listed.filter((p) => p.tokenSha256 !== tokenSha256);
  const removed = listed.find((p) => p.tokenSha256 === tokenSha256);
  if (removed === undefined) {
    throw new TesseraError(
      "invalid_input",
      `no principal in ${path} holds the token with SHA-256 ${tokenSha256.slice(0, 12)}…`,
    );
  }
  if (kept.length === 0 && !mayEmpty) {
    throw new TesseraError(
      "invalid_input",
      `that is the only principal in ${path}, and the file must name one unless the service takes an identity provider's tokens (TESSERA_IDENTITY, or identity in tessera.json): add another first, or stop the service`,
    );
  }
  replaceFile(path, `${JSON.stringify({ ...(raw as object), principals: kept }, null, 2)}\n`);
  const { tokenSha256: _digest, ...who } = removed;
  return { principal: who, remaining: kept.length };
}

function readJson(path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") {
      throw new TesseraError("file_not_found", `no principals file at ${path}`, { cause: error });
    }
    throw new TesseraError("invalid_config", `${path} cannot be read (${code ?? "error"})`, {
      cause: error,
    });
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new TesseraError("invalid_config", `${path} is not JSON`, { cause: error });
  }
}

function replaceFile(path: string, text: string): void {
  // Beside the real file (a symlink is followed, not replaced), with its mode: owner-only.
  const target = realpathSync(path);
  const mode = statSync(target).mode & 0o777 & PRIVATE_FILE_MODE;
  const temporary = join(
    dirname(target),
    `.${basename(target)}.${randomBytes(6).toString("hex")}.tmp`,
  );
  const fd = openSync(temporary, "wx", mode);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } catch (error) {
    closeSync(fd);
    rmSync(temporary, { force: true });
    throw error;
  }
  closeSync(fd);
  renameSync(temporary, target);
  const folder = openSync(dirname(target), "r");
  try {
    fsyncSync(folder);
  } finally {
    closeSync(folder);
  }
}
