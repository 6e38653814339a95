import { closeSync, fstatSync, openSync, readFileSync } from "node:fs";

/**
 * What reading a secret file found. Every file of Tessera's that holds a secret (HMAC keys,
 * client secrets, principals) must be private to its owner: one others may read is refused
 * rather than used, since a secret another user can read is no secret. The mode is checked on
 * the descriptor the text is read from, so the file cannot be swapped between the two.
 */
export type PrivateFileRead =
  | { readonly status: "read"; readonly text: string }
  /** Group or others have access the reader refuses: `mode` is the file's permission bits. */
  | { readonly status: "open_to_others"; readonly mode: number }
  /** No such file (ENOENT, ENOTDIR). */
  | { readonly status: "missing"; readonly cause: unknown }
  /** It exists but cannot be opened or read: `code` is the errno name. */
  | { readonly status: "unreadable"; readonly code: string; readonly cause: unknown };

/** Any access by group or others: what a file holding a secret is refused for. */
export const OPEN_TO_OTHERS = 0o077;
/**
 * Write access by group or others: what a file that says whom to trust (principals, an
 * identity provider's keys, a gateway's config) but holds no secret is refused for.
 */
export const WRITABLE_BY_OTHERS = 0o022;

/** Reads `path` as UTF-8 when it is private to its owner (see `PrivateFileRead`). */
export function readPrivateFile(path: string): PrivateFileRead {
  return readGuardedFile(path, OPEN_TO_OTHERS);
}

/**
 * Reads `path` as UTF-8 unless its mode has one of the `refused` permission bits
 * (`OPEN_TO_OTHERS`, `WRITABLE_BY_OTHERS`); then `open_to_others`, with the mode.
 */
export function readGuardedFile(path: string, refused: number): PrivateFileRead {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (error) {
    return failed(error);
  }
  try {
    const mode = fstatSync(fd).mode & 0o777;
    if ((mode & refused) !== 0) return { status: "open_to_others", mode };
    return { status: "read", text: readFileSync(fd, "utf8") };
  } catch (error) {
    return failed(error);
  } finally {
    closeSync(fd);
  }
}

/** `0600`, as a person types it with chmod. */
export function octalMode(mode: number): string {
  return `0${mode.toString(8)}`;
}

function failed(error: unknown): PrivateFileRead {
  const code = (error as NodeJS.ErrnoException).code ?? "error";
  return code === "ENOENT" || code === "ENOTDIR"
    ? { status: "missing", cause: error }
    : { status: "unreadable", code, cause: error };
}
