import { readFileSync } from "node:fs";
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
