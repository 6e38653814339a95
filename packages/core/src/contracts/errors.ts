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
 * An untrusted value (an ID, a path) as a message may show it: as it is when it is a plain ID
 * (word characters and `.:@-`, up to 64: a UUID, a SHA-256 in hex), else a short label that
 * does not echo it, so hostile input never reaches logs or refusals verbatim.
 */
export function redact(value: string): string {
  const printable = /^[\w.:@-]{1,64}$/.test(value);
  return printable ? value : `<${value.length} chars>`;
}
