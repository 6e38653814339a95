import { onTestFailed } from "vitest";

/**
 * Reproducible fast-check runs. Every property test takes its parameters from here:
 *
 *     await fc.assert(property, propertyParameters({ numRuns: 300 }));
 *
 * The seed is `FC_SEED` when set, otherwise a fresh one; either way it is printed when the
 * test fails, including when the failure comes after `fc.assert` passed (a coverage check
 * over the run, say), where fast-check's own report never shows it. Replay a failure with
 * `FC_SEED=<seed> npx vitest run <file>`: the same seed generates the same values.
 */
export const SEED_VARIABLE = "FC_SEED";

/** fast-check accepts any number, but folds it to 32 bits: only those seeds replay as given. */
const MIN_SEED = -(2 ** 31);
const MAX_SEED = 2 ** 31 - 1;

/**
 * `overrides` plus a seed: the caller's own `seed` when it fixes one (a fixed-seed run stays
 * fixed whatever FC_SEED says), else FC_SEED, else a fresh one. Called inside a running test,
 * it also arranges for the seed to be printed if that test fails. Typed structurally (any
 * fast-check `Parameters` fit), so the testkit needs no dependency on fast-check.
 */
export function propertyParameters<P extends object = Record<never, never>>(
  overrides: P & { readonly seed?: number } = {} as P,
): P & { readonly seed: number } {
  const seed = overrides.seed ?? seedFromEnvironment() ?? freshSeed();
  reportSeedOnFailure(seed);
  return { ...overrides, seed };
}

/** The seed FC_SEED asks for; `undefined` when it is unset or empty. */
export function seedFromEnvironment(
  env: Readonly<Record<string, string | undefined>> = process.env,
): number | undefined {
  const raw = env[SEED_VARIABLE]?.trim();
  if (raw === undefined || raw === "") return undefined;
  const seed = Number(raw);
  if (!/^-?\d+$/.test(raw) || seed < MIN_SEED || seed > MAX_SEED) {
    // A typo must not silently fall back to a random run that "passes" the replay.
    throw new Error(`${SEED_VARIABLE} must be an integer from ${MIN_SEED} to ${MAX_SEED}`);
  }
  return seed;
}

/** The line printed when a test that used `seed` fails. */
export function seedReport(seed: number): string {
  return `fast-check seed ${seed}: replay with ${SEED_VARIABLE}=${seed}`;
}

function freshSeed(): number {
  // A signed 32-bit integer, the form fast-check prints its own seeds in.
  return (Math.random() * 2 ** 32) | 0;
}

function reportSeedOnFailure(seed: number): void {
  try {
    onTestFailed(() => {
      console.error(seedReport(seed));
    });
  } catch {
    // Not inside a running test (collection time, a script): nothing to attach the report to;
    // a failing fc.assert still names its seed in its own error.
  }
}
