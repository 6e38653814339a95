import { TesseraError } from "@tessera/core";

type Env = Readonly<Record<string, string | undefined>>;

/**
 * A `TESSERA_*` variable read where a command consults it: undefined when unset; set to the
 * empty string, refused (`invalid_config`), never taken as unset. An empty value is nearly
 * always a slip (`TESSERA_DATA=$UNSET_VAR`), and taken as unset it would read, or make,
 * something else than meant.
 */
export function nonEmptyEnv(name: string, env: Env = process.env): string | undefined {
  const value = env[name];
  if (value === "") throw new TesseraError("invalid_config", `${name} is set but empty`);
  return value;
}

/**
 * `TESSERA_DATA`, the data directory a command takes when `--data` (or its own source flags)
 * name none: every command reads it through here, so an empty one is refused alike by all.
 */
export function dataDirFromEnv(env: Env = process.env): string | undefined {
  return nonEmptyEnv("TESSERA_DATA", env);
}
