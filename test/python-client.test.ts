import { spawn, spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

/**
 * The Python client's own suite (`clients/python/tests`, standard-library unittest) as part of
 * `npm test`: it starts real `tessera serve` processes from `packages/cli/dist`, which `npm test`
 * builds before vitest runs. Without python3 ≥ 3.10 this file skips and says why; under
 * `CI=true` that is a failure (`.ci/run` installs Debian's python3).
 *
 * What `python3 -m unittest discover` finds runs one module per vitest test, the modules at the
 * same time (issue 26): they wait on their own services, pip and mypy, and one after another
 * they were one of the run's longest files. Each module is its own `python3 -m unittest`
 * process, so it keeps its setUpModule's service to itself; discovery's per-module counts are
 * checked against what each process ran, so no module and no test case is left out.
 */
const dir = fileURLToPath(new URL("../clients/python/", import.meta.url));
const python = process.env.TESSERA_PYTHON ?? "python3";
const inCi = process.env.CI === "true";

function findPython(): string | undefined {
  const probe = spawnSync(python, ["-c", "import sys; print(sys.version_info >= (3, 10))"], {
    encoding: "utf8",
  });
  if (probe.error !== undefined || probe.status !== 0) return `${python} is not on PATH`;
  if (probe.stdout.trim() !== "True") return `${python} is older than 3.10`;
  return undefined;
}

const missing = findPython();
if (missing !== undefined && !inCi) {
  console.warn(
    `skipping the Python client's tests (clients/python): ${missing}; install python3 >= 3.10 to run them (under CI=true this fails)`,
  );
}

/** Test cases per module, as `unittest discover` (the command this file used to run) finds them. */
const DISCOVER = `
import json, unittest
loader = unittest.TestLoader()
counts = {}
def walk(suite):
    for test in suite:
        if isinstance(test, unittest.TestSuite):
            walk(test)
        else:
            counts[type(test).__module__] = counts.get(type(test).__module__, 0) + 1
walk(loader.discover("."))
print(json.dumps({"counts": counts, "errors": loader.errors}))
`;

interface Discovered {
  counts: Record<string, number>;
  errors: string[];
}

function discover(): Discovered | string {
  const found = spawnSync(python, ["-c", DISCOVER], { cwd: dir, encoding: "utf8" });
  if (found.error !== undefined || found.status !== 0) {
    return `discovery failed: ${found.error?.message ?? ""}${found.stdout}${found.stderr}`;
  }
  return JSON.parse(found.stdout) as Discovered;
}

const discovered = missing === undefined ? discover() : undefined;
const modules =
  typeof discovered === "object"
    ? Object.keys(discovered.counts)
        .filter((name) => name.startsWith("tests."))
        .sort()
    : [];

function unittest(module: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(python, ["-m", "unittest", "-v", module], {
      cwd: dir,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk) => {
      output += String(chunk);
    });
    child.stderr.on("data", (chunk) => {
      output += String(chunk);
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, output }));
  });
}

describe("the Python client (clients/python)", () => {
  it.skipIf(missing !== undefined && !inCi)(
    "python3 -m unittest discover finds its test modules, each importable",
    () => {
      expect(missing, "CI needs python3 >= 3.10 (.ci/run installs it)").toBeUndefined();
      expect(typeof discovered === "string" ? discovered : "").toBe("");
      if (typeof discovered !== "object") return;
      // A module that fails to import shows up as the loader's error, not as a module.
      expect(discovered.errors).toEqual([]);
      expect(Object.keys(discovered.counts).sort()).toEqual(modules);
      expect(modules.length).toBeGreaterThan(0);
    },
  );

  it.concurrent.for(modules)(
    "%s passes (python3 -m unittest, its services its own)",
    { timeout: 10 * 60_000 },
    async (module, { expect }) => {
      const { code, output } = await unittest(module);
      // The whole report on failure; only its closing lines when it passed.
      expect(code, output).toBe(0);
      expect(output).toMatch(/\nOK( \(skipped=\d+\))?\s*$/);
      const ran = /\nRan (\d+) tests? in /.exec(output)?.[1];
      expect(Number(ran), output).toBe(
        typeof discovered === "object" ? discovered.counts[module] : Number.NaN,
      );
    },
  );
});
