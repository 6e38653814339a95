import { lstatSync, type Stats } from "node:fs";
import { join, resolve } from "node:path";
import { TesseraError } from "@tessera/core";

/** The layout `tessera init` provisions; `serve --data` reads the same names. */
export const DATA_LAYOUT = Object.freeze({
  config: "tessera.json",
  database: "tessera.db",
  claims: "claims",
  principals: "principals.json",
});

/** Owner-only: a bearer-token digest or a claim marker readable by others is a leak. */
export const PRIVATE_DIR_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;

/**
 * Checks a data directory before anything in it is read: a real directory (not a symlink,
 * which another user could re-point), owned by this user, closed to group and others. It is
 * never created here: a serve that created a missing directory would start an empty claim
 * history after a loss, in which replays run again.
 */
export function checkDataDir(dir: string): string {
  const path = resolve(dir);
  let stat: Stats;
  try {
    stat = lstatSync(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") {
      throw new TesseraError(
        "data_dir_missing",
        `no data directory at ${path}: provision one with \`tessera init ${dir}\` (serve never creates it)`,
        { cause: error },
      );
    }
    throw new TesseraError(
      "data_dir_insecure",
      `the data directory at ${path} cannot be inspected (${code ?? "error"})`,
      { cause: error },
    );
  }
  const unsafe = unsafeBecause(stat);
  if (unsafe !== undefined) {
    throw new TesseraError("data_dir_insecure", `the data directory at ${path} ${unsafe}`);
  }
  return path;
}

/** Why a directory's stat makes it unsafe to keep private state in, or undefined. */
export function unsafeBecause(stat: Stats): string | undefined {
  if (stat.isSymbolicLink()) return "is a symbolic link; name the real directory";
  if (!stat.isDirectory()) return "is not a directory";
  const uid = process.getuid?.();
  if (uid !== undefined && stat.uid !== uid) {
    return `belongs to uid ${stat.uid}, not to this user (uid ${uid})`;
  }
  if ((Number(stat.mode) & 0o077) !== 0) {
    const mode = (Number(stat.mode) & 0o777).toString(8).padStart(3, "0");
    return `is open to group or others (mode ${mode}); chmod 700 it`;
  }
  return undefined;
}

export function dataPath(dir: string, name: keyof typeof DATA_LAYOUT): string {
  return join(dir, DATA_LAYOUT[name]);
}
