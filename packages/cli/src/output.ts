import { isTesseraError } from "@tessera/core";

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

export function printLines(lines: readonly string[]): void {
  process.stdout.write(lines.length > 0 ? `${lines.join("\n")}\n` : "");
}

/**
 * Exit codes: 0 done, 1 unexpected failure, 2 a refusal or misuse with a stable code
 * (the code is printed first so scripts can match on it).
 */
export function reportError(error: unknown): number {
  if (isTesseraError(error)) {
    process.stderr.write(`tessera: ${error.code}: ${error.message}\n`);
    return 2;
  }
  const message = error instanceof Error ? (error.stack ?? error.message) : String(error);
  process.stderr.write(`tessera: unexpected failure: ${message}\n`);
  return 1;
}
