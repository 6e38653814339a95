import { type ErrorCode, isTesseraError, TesseraError } from "@tessera/core";

/**
 * What the connection (`database.ts`) and its group commit (`group-commit.ts`) both say about
 * a failure, in a file of its own that imports neither: the two depend on it, never on each
 * other in a circle.
 */

/** The `*_unavailable` code a port reports when SQLite cannot answer. */
export type UnavailableCode =
  | "usage_store_unavailable"
  | "claim_store_unavailable"
  | "grant_store_unavailable"
  | "audit_unavailable"
  | "store_unavailable";

export function unavailable(code: UnavailableCode, error: unknown): Error {
  if (isTesseraError(error)) return error;
  // The driver's code (SQLITE_BUSY, SQLITE_IOERR…) names the failure without echoing data.
  const driverCode = (error as { code?: unknown })?.code;
  const what = typeof driverCode === "string" ? driverCode : "connection closed or unusable";
  return new TesseraError(code as ErrorCode, `SQLite store unavailable (${what})`, {
    cause: error,
  });
}
