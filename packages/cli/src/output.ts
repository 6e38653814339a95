// Nothing heavy here: bin.ts loads this before it knows which command runs.

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

export function printLines(lines: readonly string[]): void {
  process.stdout.write(lines.length > 0 ? `${lines.join("\n")}\n` : "");
}

/**
 * A listing's lines; when there are none, `empty` goes to stderr. Standard output stays one
 * line per item (a script counting lines reads 0), and a person sees that the read worked and
 * found nothing, not a silence that could be a wrong namespace or a command that did nothing.
 */
export function printList(lines: readonly string[], empty: string): void {
  if (lines.length > 0) printLines(lines);
  else process.stderr.write(`${empty}\n`);
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
