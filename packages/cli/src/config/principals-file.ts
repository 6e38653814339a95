import { randomBytes } from "node:crypto";
import {
  closeSync,
  fchmodSync,
  fchownSync,
  fstatSync,
  fsyncSync,
  openSync,
  realpathSync,
  renameSync,
  rmSync,
  type Stats,
  statSync,
  writeSync,
} from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { TesseraError } from "@tessera/core";
import { parsePrincipals, tokenDigest } from "@tessera/server";
import { readNamedFile } from "../files.js";
import { checkDataDir, PRIVATE_FILE_MODE } from "./data-dir.js";
import { dataDirFromEnv, nonEmptyEnv } from "./env.js";
import { withFileLock } from "./file-lock.js";
import { readConfigFile } from "./load.js";

/**
 * The principals file as `tessera tokens` edits it: found the way `tessera serve` finds it,
 * checked whole before and after every edit, edited by one process at a time (a lock file
 * beside it), and replaced atomically with its owner and mode kept (a serve reading it on
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
  const data = options.data ?? dataDirFromEnv();
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
  const data = options.data ?? dataDirFromEnv();
  return data !== undefined && readConfigFile(checkDataDir(data)).identity !== undefined;
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
  return editPrincipals(path, (raw, listed) => {
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
    const { tokenSha256: _digest, ...who } = removed;
    return {
      next: { ...raw, principals: kept },
      result: { principal: who, remaining: kept.length },
    };
  });
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
  return editPrincipals(path, (raw, listed) => {
    const token = mintToken();
    const principal: FilePrincipal = { tokenSha256: tokenDigest(token), ...who };
    return {
      next: { ...raw, principals: [...listed, principal] },
      result: { token, principal, count: listed.length + 1 },
    };
  });
}

/**
 * One read-modify-rename of the file, under its lock (`file-lock.ts`): without it, two
 * `tokens` commands at once each rewrite the file from their own read, so one's edit is lost
 * (an added token missing, a revoked one back). The file must check whole before it is
 * rewritten (an edit never turns a file the service refuses into one it accepts by accident,
 * or the reverse), and so must the result (a principal serve would refuse is never written).
 * `edit` may throw to refuse: nothing is written then.
 */
function editPrincipals<T>(
  path: string,
  edit: (
    raw: Record<string, unknown>,
    listed: readonly FilePrincipal[],
  ) => { next: Record<string, unknown>; result: T },
): T {
  const target = realPath(path);
  return withFileLock(target, () => {
    const raw = readJson(target);
    parsePrincipals(raw);
    const file = raw as { principals: FilePrincipal[] } & Record<string, unknown>;
    const { next, result } = edit(file, file.principals);
    parsePrincipals(next);
    replaceFile(target, `${JSON.stringify(next, null, 2)}\n`);
    return result;
  });
}

/**
 * The file's real path (a symlink is followed, not replaced), so that every name of one file
 * shares one lock. A file that is not there is told as reading it tells it.
 */
function realPath(path: string): string {
  try {
    return realpathSync(path);
  } catch (error) {
    readNamedFile(path, "principals file", "invalid_config");
    throw error;
  }
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

/**
 * Replaces `target` (a real path) atomically: a temporary file beside it, synced, then renamed
 * over it, with the old file's mode (at most owner-only) and its owner and group. Run as root
 * on the service user's file, a plain rewrite would leave it root's, and the service could
 * no longer read it; so the copy is given the old owner first, or, where that is not allowed,
 * nothing is replaced.
 */
function replaceFile(target: string, text: string): void {
  const old = statSync(target);
  const mode = old.mode & 0o777 & PRIVATE_FILE_MODE;
  const temporary = join(
    dirname(target),
    `.${basename(target)}.${randomBytes(6).toString("hex")}.tmp`,
  );
  const fd = openSync(temporary, "wx", mode);
  try {
    keepOwner(fd, old, target);
    // Exactly the old mode, whatever the umask took from the one given to open.
    fchmodSync(fd, mode);
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

function keepOwner(fd: number, old: Stats, target: string): void {
  const made = fstatSync(fd);
  if (made.uid === old.uid && made.gid === old.gid) return;
  try {
    fchownSync(fd, old.uid, old.gid);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? "error";
    throw new TesseraError(
      "invalid_usage",
      `${target} belongs to uid ${old.uid} gid ${old.gid}, which this user (uid ${made.uid}) cannot give its rewritten copy (${code}): run tessera tokens as the file's owner or as root; nothing was changed`,
      { cause: error },
    );
  }
}
