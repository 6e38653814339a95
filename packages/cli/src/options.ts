import { InvalidArgumentError } from "commander";

/** Parses a whole number in [min, max] for an option, with a message that names the bound. */
export function wholeNumber(min: number, max: number) {
  return (raw: string): number => {
    const value = Number(raw);
    if (!Number.isInteger(value) || value < min || value > max) {
      throw new InvalidArgumentError(`expected a whole number from ${min} to ${max}`);
    }
    return value;
  };
}

/**
 * Every string option: an empty value is a slip (an unset shell variable), never a name.
 * Without this, `--namespace ""` lists a namespace nobody can have and exits 0.
 */
export function nonEmpty(raw: string): string {
  if (raw.length === 0) throw new InvalidArgumentError("expected a non-empty value");
  return raw;
}
