import type { ErrorCode } from "./vocabulary.js";

/**
 * Every error Tessera throws on purpose. Match on `code`, never on the message or the class
 * name: the message is for people and may change, the code is stable.
 */
export class TesseraError extends Error {
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "TesseraError";
    this.code = code;
  }
}

export function isTesseraError(value: unknown, code?: ErrorCode): value is TesseraError {
  return value instanceof TesseraError && (code === undefined || value.code === code);
}

/**
 * A short, non-reversible label for an untrusted value (an ID, a path) to put in a message
 * without echoing it: hostile input never reaches logs or refusals verbatim.
 */
export function redact(value: string): string {
  const printable = /^[\w.:@-]{1,32}$/.test(value);
  return printable ? value : `<${value.length} chars>`;
}
