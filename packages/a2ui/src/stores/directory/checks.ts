import { lstatSync, type Stats } from "node:fs";
import { TesseraError } from "@tessera/core";

/** The identity a claim directory had when it was opened; every later check compares to it. */
export interface DirectoryIdentity {
  readonly dev: number;
  readonly ino: number;
}

/**
 * Checks that `dir` is a private directory of the current user: a real directory (not a
 * symlink), owned by this uid, with no group or other permission bits. Throws
 * `claim_dir_missing` or `claim_dir_insecure`; never creates anything.
 */
export function checkPrivateDirectory(dir: string): Stats {
  let stats: Stats;
  try {
    stats = lstatSync(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") {
      throw new TesseraError(
        "claim_dir_missing",
        "the claim directory does not exist; the host must provision it",
      );
    }
    throw new TesseraError("claim_dir_insecure", "the claim directory cannot be inspected", {
      cause: error,
    });
  }
  if (stats.isSymbolicLink()) {
    throw new TesseraError("claim_dir_insecure", "the claim directory is a symlink");
  }
  if (!stats.isDirectory()) {
    throw new TesseraError("claim_dir_insecure", "the claim directory path is not a directory");
  }
  const uid = process.getuid?.();
  if (uid !== undefined && stats.uid !== uid) {
    throw new TesseraError(
      "claim_dir_insecure",
      "the claim directory is not owned by the current user",
    );
  }
  if ((stats.mode & 0o077) !== 0) {
    throw new TesseraError(
      "claim_dir_insecure",
      "the claim directory is open to group or other users (needs mode 0700)",
    );
  }
  return stats;
}

/**
 * Before each claim: the path must still name the very directory that was opened. A
 * directory removed, replaced or swapped for a symlink fails closed; nothing is recreated.
 */
export function checkSameDirectory(dir: string, identity: DirectoryIdentity): void {
  let stats: Stats;
  try {
    stats = checkPrivateDirectory(dir);
  } catch (error) {
    if (
      error instanceof TesseraError &&
      error.code === "claim_dir_insecure" &&
      /symlink|not a directory/.test(error.message)
    ) {
      throw new TesseraError(
        "claim_dir_changed",
        "the claim directory was replaced since it was opened",
        { cause: error },
      );
    }
    throw error;
  }
  if (stats.dev !== identity.dev || stats.ino !== identity.ino) {
    throw new TesseraError(
      "claim_dir_changed",
      "the claim directory was replaced since it was opened",
    );
  }
}
