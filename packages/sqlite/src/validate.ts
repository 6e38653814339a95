import { TesseraError } from "@tessera/core";

/** Refuses a key that is not a string, naming the argument, never echoing the value. */
export function requireString(value: unknown, what: string): string {
  if (typeof value !== "string")
    throw new TesseraError("invalid_input", `${what} must be a string`);
  return value;
}

export function requireFiniteNumber(value: unknown, what: string): number {
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw new TesseraError("invalid_input", `${what} must be a finite number`);
  }
  return value;
}
