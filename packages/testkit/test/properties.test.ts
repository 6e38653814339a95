/**
 * The property-test helper: a run is replayed exactly by the seed it reports, FC_SEED is read
 * strictly, and a failing test prints its seed even when fast-check itself passed.
 */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import {
  propertyParameters,
  SEED_VARIABLE,
  seedFromEnvironment,
  seedReport,
} from "@tessera/testkit";
import fc from "fast-check";
import { afterEach, describe, expect, it, vi } from "vitest";

afterEach(() => {
  vi.unstubAllEnvs();
});

/** The values a property saw, in order, run through fc.assert as a property test would be. */
function valuesSeenBy(parameters: { readonly seed?: number }): unknown[] {
  const seen: unknown[] = [];
  fc.assert(
    fc.property(fc.string(), fc.integer(), (text, n) => {
      seen.push([text, n]);
    }),
    { ...parameters, numRuns: 25 },
  );
  return seen;
}

describe("propertyParameters", () => {
  it("FC_SEED replays the run: the same seed, the same values in the same order", () => {
    vi.stubEnv(SEED_VARIABLE, "");
    const first = propertyParameters();
    expect(Number.isInteger(first.seed)).toBe(true);
    const original = valuesSeenBy(first);

    vi.stubEnv(SEED_VARIABLE, String(first.seed));
    const replay = propertyParameters();
    expect(replay.seed).toBe(first.seed);
    expect(valuesSeenBy(replay)).toEqual(original);
    // The seed alone decides the values: fast-check given it directly agrees.
    expect(valuesSeenBy({ seed: first.seed })).toEqual(original);
  });

  it("FC_SEED is used as given, negative seeds included (fast-check prints those)", () => {
    vi.stubEnv(SEED_VARIABLE, "-1244079154");
    expect(propertyParameters().seed).toBe(-1244079154);
  });

  it("keeps the caller's other parameters, and a fixed seed stays fixed whatever FC_SEED says", () => {
    vi.stubEnv(SEED_VARIABLE, "7");
    expect(propertyParameters({ numRuns: 60 })).toEqual({ numRuns: 60, seed: 7 });
    expect(propertyParameters({ numRuns: 300, seed: 42 })).toEqual({ numRuns: 300, seed: 42 });
  });

  it("reads FC_SEED strictly: unset or empty means a fresh seed, anything else must be a 32-bit integer", () => {
    expect(seedFromEnvironment({})).toBeUndefined();
    expect(seedFromEnvironment({ FC_SEED: "" })).toBeUndefined();
    expect(seedFromEnvironment({ FC_SEED: " 12 " })).toBe(12);
    expect(seedFromEnvironment({ FC_SEED: "2147483647" })).toBe(2147483647);
    expect(seedFromEnvironment({ FC_SEED: "-2147483648" })).toBe(-2147483648);
    for (const bad of ["abc", "1.5", "1e3", "0x10", "2147483648", "-2147483649", "12abc"]) {
      expect(() => seedFromEnvironment({ FC_SEED: bad }), bad).toThrow(/FC_SEED must be/);
    }
  });
});

const FIXTURE_DIR = fileURLToPath(new URL("./fixtures/seed-report/", import.meta.url));
const VITEST = fileURLToPath(new URL("../../../node_modules/vitest/vitest.mjs", import.meta.url));

/** Runs the fixture (a check that fails after a passing property) in its own vitest. */
function runFixture(seed: string | undefined): Promise<{ status: number | null; output: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: "1", CI: "" };
  delete env[SEED_VARIABLE];
  delete env.FORCE_COLOR;
  if (seed !== undefined) env[SEED_VARIABLE] = seed;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [VITEST, "run", "--root", FIXTURE_DIR], {
      cwd: FIXTURE_DIR,
      env,
    });
    let output = "";
    child.stdout.on("data", (chunk) => {
      output += chunk;
    });
    child.stderr.on("data", (chunk) => {
      output += chunk;
    });
    child.on("error", reject);
    child.on("close", (status) => resolve({ status, output }));
  });
}

describe("a failing property test reports its seed", () => {
  it("prints the seed of a failure fast-check never saw, and FC_SEED replays the same values", async () => {
    const first = await runFixture(undefined);
    expect(first.status).toBe(1);
    const seed = /replay with FC_SEED=(-?\d+)/.exec(first.output)?.[1];
    expect(seed, first.output).toBeDefined();
    expect(first.output).toContain(seedReport(Number(seed)));
    const generated = /generated (\[[^\]]*\])/.exec(first.output)?.[1];
    expect(generated, first.output).toBeDefined();

    const replay = await runFixture(seed);
    expect(replay.status).toBe(1);
    expect(replay.output).toContain(seedReport(Number(seed)));
    expect(/generated (\[[^\]]*\])/.exec(replay.output)?.[1]).toBe(generated);
  });
});
