import { closeSync, fstatSync, openSync, readFileSync } from "node:fs";

/**
 * What reading a secret file found. Every file of Tessera's that holds a secret (HMAC keys,
 * client secrets, principals) must be private to its owner: one others may read is refused
 * rather than used, since a secret another user can read is no secret. The mode is checked on
 * the descriptor the text is read from, so the file cannot be swapped between the two.
 */
export type PrivateFileRead =
  | { readonly status: "read"; readonly text: string }
  /** Group or others have some access: `mode` is the file's permission bits. */
  | { readonly status: "open_to_others"; readonly mode: number }
  /** No such file (ENOENT, ENOTDIR). */
  | { readonly status: "missing"; readonly cause: unknown }
  /** It exists but cannot be opened or read: `code` is the errno name. */
  | { readonly status: "unreadable"; readonly code: string; readonly cause: unknown };

/** Reads `path` as UTF-8 when it is private to its owner (see `PrivateFileRead`). */
export function readPrivateFile(path: string): PrivateFileRead {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (error) {
    return failed(error);
  }
  try {
    const mode = fstatSync(fd).mode & 0o777;
    if ((mode & 0o077) !== 0) return { status: "open_to_others", mode };
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
