import { isTesseraClientError } from "@tessera/client";
import { isTesseraError } from "@tessera/core";
import { jsonErrorsOn, printable, writeError } from "./output.js";

/**
 * Exit codes: 0 done, 1 unexpected failure, 2 a refusal or misuse with a stable code
 * (the code is printed first so scripts can match on it). Its own module: the error classes
 * come with their packages, which a command that succeeds without them never loads.
 */
export function reportError(error: unknown): number {
  if (isTesseraClientError(error)) {
    const { code, message, ...extra } = error.toJSON() as { code: string; message: string };
    writeError(code, message, extra);
    return 2;
  }
  if (isTesseraError(error)) {
    writeError(error.code, error.message);
    return 2;
  }
  if (jsonErrorsOn()) {
    const message = error instanceof Error ? error.message : String(error);
    process.stderr.write(`${JSON.stringify({ error: { code: "unexpected", message } })}\n`);
    return 1;
  }
  const message = error instanceof Error ? (error.stack ?? error.message) : String(error);
  // A stack spans lines by design; each line of it is made printable.
  process.stderr.write(
    `tessera: unexpected failure: ${message.split("\n").map(printable).join("\n")}\n`,
  );
  return 1;
}
