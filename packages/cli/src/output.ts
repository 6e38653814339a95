// Nothing heavy here: bin.ts loads this before it knows which command runs.
import { once } from "node:events";

/**
 * The characters that print as something other than themselves and that JSON leaves as they
 * are (it escapes C0 controls only): DEL and the C1 controls (U+009B is a terminal's CSI), the
 * line and paragraph separators, and the bidi marks, embeddings, overrides and isolates.
 */
const RAW_IN_JSON_CLASS =
  "\\u007f-\\u009f\\u061c\\u200e\\u200f\\u2028\\u2029\\u202a-\\u202e\\u2066-\\u2069";
/** Those, and the C0 controls: escape sequences, carriage return, a newline inside a field. */
const UNPRINTABLE = new RegExp(`[\\u0000-\\u001f${RAW_IN_JSON_CLASS}]`, "g");
/** In JSON they can only stand inside strings, where `\uXXXX` means the same: JSON stays exact. */
const RAW_IN_JSON = new RegExp(`[${RAW_IN_JSON_CLASS}]`, "g");

/**
 * `text` with every unprintable character written as a `\uXXXX` escape. What the CLI prints
 * comes from stores and tokens other people wrote (an agent names its call ID, a tool its
 * path): an operator reading the audit trail must see one line per event, never a line an agent
 * forged with `\r\n` or a terminal command hidden in an ID. `--json` output is exact.
 */
export function printable(text: string): string {
  return text.replace(UNPRINTABLE, escaped);
}

function escaped(character: string): string {
  return `\\u${character.charCodeAt(0).toString(16).padStart(4, "0")}`;
}

export function printJson(value: unknown): void {
  // `?? "null"`: JSON.stringify answers undefined for undefined, which has no JSON.
  const json = (JSON.stringify(value, null, 2) ?? "null").replace(RAW_IN_JSON, escaped);
  process.stdout.write(`${json}\n`);
}

/**
 * When the reader of standard output goes away (`tessera audit list | head`), stop there:
 * the listing has been read as far as it was wanted, which is no error to report with a
 * stack. The exit status is the one set so far (0 unless something failed before).
 */
export function endQuietlyWhenReaderLeaves(): void {
  process.stdout.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code !== "EPIPE") throw error;
    process.exit();
  });
}

/**
 * Waits until standard output has taken what was written. A pipe to a slower reader (`| less`,
 * `| gzip`) takes writes into memory without limit; a listing that waits after each page holds
 * one page however long the trail.
 */
export async function drained(): Promise<void> {
  if (process.stdout.writableNeedDrain) await once(process.stdout, "drain");
}

/**
 * A JSON array printed as its elements come, byte for byte what `printJson` prints for the
 * whole array: a listing of any length is printed holding one page of it.
 */
export class JsonArrayPrinter {
  #count = 0;

  add(items: readonly unknown[]): void {
    let text = "";
    for (const item of items) {
      const json = (JSON.stringify(item, null, 2) ?? "null").replace(RAW_IN_JSON, escaped);
      text += `${this.#count++ === 0 ? "[\n" : ",\n"}  ${json.replaceAll("\n", "\n  ")}`;
    }
    if (text !== "") process.stdout.write(text);
  }

  end(): void {
    process.stdout.write(this.#count === 0 ? "[]\n" : "\n]\n");
  }
}

/** One line per item, each made printable: an item never spans or rewrites a line. */
export function printLines(lines: readonly string[]): void {
  process.stdout.write(lines.length > 0 ? `${lines.map(printable).join("\n")}\n` : "");
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
      : `tessera: ${code}: ${printable(message)}\n`,
  );
}
