import { randomBytes } from "node:crypto";
import {
  closeSync,
  fsyncSync,
  openSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeSync,
} from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { TesseraError } from "@tessera/core";
import { parsePrincipals, tokenDigest } from "@tessera/server";
import { readNamedFile } from "../files.js";
import { checkDataDir, PRIVATE_FILE_MODE } from "./data-dir.js";
import { readConfigFile } from "./load.js";

/**
 * The principals file as `tessera tokens` edits it: found the way `tessera serve` finds it,
 * checked whole before and after every edit, and replaced atomically (a serve reading it on
 * SIGHUP sees the old file or the new one, never half of one). It only ever holds digests.
 */

/** Where the principals file is: the flags `tokens` takes. */
export interface PrincipalsFileOptions {
  data?: string;
  principals?: string;
}

/** `--principals`, else `TESSERA_PRINCIPALS`, else the data directory's `principals` key. */
export function principalsPath(options: PrincipalsFileOptions): string {
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
export function identityConfigured(options: PrincipalsFileOptions): boolean {
  if (nonEmptyEnv("TESSERA_IDENTITY") !== undefined) return true;
  const data = options.data ?? nonEmptyEnv("TESSERA_DATA");
  return data !== undefined && readConfigFile(checkDataDir(data)).identity !== undefined;
}

function nonEmptyEnv(name: string): string | undefined {
  const value = process.env[name];
  if (value === "") throw new TesseraError("invalid_config", `${name} is set but empty`);
  return value;
}

export interface FilePrincipal {
  tokenSha256: string;
  namespaceId: string;
  actor: string;
  authority: string;
  role?: string;
  owner?: string;
  purpose?: string;
  session?: string;
}

/**
 * Rewrites the file without the principal, atomically (a temporary file beside it, synced,
 * then renamed over it): a serve reading it on SIGHUP sees the old file or the new one, never
 * half of one. Refused, and nothing written, when no principal holds the token, or it is the
 * last one and the service has no identity provider (a serve would keep the old set instead).
 */
export function removePrincipal(
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

/** The principals the file names, checked as serve checks them, digests included. */
export function listPrincipals(path: string): readonly FilePrincipal[] {
  const raw = readJson(path);
  parsePrincipals(raw);
  return (raw as { principals: FilePrincipal[] }).principals;
}

/**
 * Mints a token for `who` and adds its digest to the file; the token itself is returned, to
 * be shown once: it is kept nowhere. The file with the new principal is checked whole before
 * it replaces the old one, so a principal serve would refuse is never written.
 */
export function addPrincipal(
  path: string,
  who: Omit<FilePrincipal, "tokenSha256">,
): { token: string; principal: FilePrincipal; count: number } {
  const raw = readJson(path);
  parsePrincipals(raw);
  const listed = (raw as { principals: FilePrincipal[] }).principals;
  const token = mintToken();
  const principal: FilePrincipal = { tokenSha256: tokenDigest(token), ...who };
  const next = { ...(raw as object), principals: [...listed, principal] };
  parsePrincipals(next);
  replaceFile(path, `${JSON.stringify(next, null, 2)}\n`);
  return { token, principal, count: listed.length + 1 };
}

/** A bearer token: `tsk_` and 256 random bits, base64url. */
export function mintToken(): string {
  return `tsk_${randomBytes(32).toString("base64url")}`;
}

function readJson(path: string): unknown {
  const text = readNamedFile(path, "principals file", "invalid_config");
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
