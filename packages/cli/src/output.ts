// Nothing heavy here: bin.ts loads this before it knows which command runs.

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
