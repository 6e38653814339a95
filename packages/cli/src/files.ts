import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { type ErrorCode, TesseraError } from "@tessera/core";

/**
 * Reads a file the operator named (`-` is standard input). A missing file is
 * `file_not_found`; any other failure to read it is `unreadable`, with the system's code as
 * the cause, so neither reaches the operator as an unexpected failure with a stack.
 */
export function readNamedFile(path: string, what: string, unreadable: ErrorCode): string {
  try {
    return readFileSync(path === "-" ? 0 : path, "utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") {
      throw new TesseraError("file_not_found", `no ${what} at ${path}`, { cause: error });
    }
    throw new TesseraError(
      unreadable,
      `the ${what} at ${path} cannot be read (${code ?? "error"})`,
      {
        cause: error,
      },
    );
  }
}

/**
 * Writes `text` to `path` as a new file, never over one that is there: what a command writes
 * to be kept (a signed checkpoint, a key) is not replaced by a second run. A path that cannot
 * take it (no such directory, a directory, no permission) is the caller's `invalid_usage`,
 * naming the path and the system's code, not a crash with a stack.
 */
export function writeNewFile(path: string, text: string, what: string, mode = 0o644): void {
  try {
    writeFileSync(path, text, { mode, flag: "wx" });
  } catch (error) {
    const code = systemCode(error);
    if (code === "EEXIST") {
      throw new TesseraError("invalid_usage", `${what} is already at ${path}; not replaced`);
    }
    throw new TesseraError("invalid_usage", `cannot write ${what} to ${path} (${code})`, {
      cause: error,
    });
  }
}

/** `mkdir -p` with mode 0700, its failure told as `writeNewFile` tells one. */
export function makePrivateDirectory(path: string, what: string): void {
  try {
    mkdirSync(path, { recursive: true, mode: 0o700 });
  } catch (error) {
    throw new TesseraError(
      "invalid_usage",
      `cannot make ${what} at ${path} (${systemCode(error)})`,
      {
        cause: error,
      },
    );
  }
}

function systemCode(error: unknown): string {
  return (error as NodeJS.ErrnoException).code ?? "error";
}
