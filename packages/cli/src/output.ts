import { isTesseraClientError } from "@tessera/client";
import { isTesseraError } from "@tessera/core";

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

export function printLines(lines: readonly string[]): void {
  process.stdout.write(lines.length > 0 ? `${lines.join("\n")}\n` : "");
}

let jsonErrors = false;

/**
 * `--json` anywhere on the command line makes errors JSON too (`{"error":{"code","message"}}`
 * on stderr), usage errors included: a script that asked for JSON parses both streams.
 */
export function useJsonErrors(on: boolean): void {
  jsonErrors = on;
}

export function jsonErrorsOn(): boolean {
  return jsonErrors;
}

/** Writes one refusal to stderr in the chosen shape. */
export function writeError(code: string, message: string, extra: object = {}): void {
  process.stderr.write(
    jsonErrors
      ? `${JSON.stringify({ error: { code, message, ...extra } })}\n`
      : `tessera: ${code}: ${message}\n`,
  );
}

/**
 * Exit codes: 0 done, 1 unexpected failure, 2 a refusal or misuse with a stable code
 * (the code is printed first so scripts can match on it).
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
  if (jsonErrors) {
    const message = error instanceof Error ? error.message : String(error);
    process.stderr.write(`${JSON.stringify({ error: { code: "unexpected", message } })}\n`);
    return 1;
  }
  const message = error instanceof Error ? (error.stack ?? error.message) : String(error);
  process.stderr.write(`tessera: unexpected failure: ${message}\n`);
  return 1;
}
