import { availableParallelism } from "node:os";
import { defineConfig } from "vitest/config";
import { HeaviestFirst } from "./test/support/heaviest-first.js";
import { RunSummary } from "./test/support/run-summary.js";

/**
 * The unit tests beside the code: in-memory, no processes, no databases. They share their
 * workers' module cache instead of each starting a fresh process (about half a second of CPU a
 * file, a third of what these files cost). The one that replaces a built-in module (`vi.mock`)
 * keeps a process of its own, with everything under packages/\* /test and test/ (issue 26).
 */
const UNITS = ["packages/*/src/**/*.test.ts"];
const MOCKS_A_MODULE = ["packages/a2ui/src/stores/directory/directory-store.faults.test.ts"];
/**
 * Files whose assertions hold only while nothing else runs: they run on their own once
 * everything else is done.
 * - The MCP ledger's write window (10 ms) must still be open three event-loop turns after an
 *   answer is queued; beside three busy workers it was not, once in four full runs.
 * - The PostgreSQL plan test counts the scans of a plan cached while its tables were small.
 *   A schema created or dropped anywhere in the database resets every backend's cached plans
 *   (PostgreSQL's plan cache listens to pg_namespace), and the other PostgreSQL tests make
 *   and drop one each: its control then counted 0 scans of 20 in CI, and does so here with a
 *   loop of CREATE SCHEMA / DROP SCHEMA beside it.
 */
const ALONE = ["packages/mcp/src/ledger.test.ts", "packages/postgres/test/record-plan.test.ts"];

export default defineConfig({
  test: {
    pool: "forks",
    // Most files wait on child processes, PostgreSQL and Redis rather than compute, so twice as
    // many files run at once as there are cores (vitest's default, one fewer than the cores, is
    // a single worker on a 2-core CI machine). Each file's own tests still run one after another.
    // TESSERA_TEST_WORKERS=N overrides: the projects below inherit this value, and it outranks
    // `vitest run --maxWorkers=N` there (issue 26).
    maxWorkers: Number(process.env.TESSERA_TEST_WORKERS) || Math.max(4, 2 * availableParallelism()),
    // The longest files first, so the run does not end on one long file alone (issue 26).
    sequence: { sequencer: HeaviestFirst },
    // Under CI a JSON report too, from which .ci/run prints its closing "N passed, N failed".
    // And, last, what the run skipped and why, and its expected failures (run-summary.ts).
    reporters:
      process.env.CI === "true"
        ? ["default", ["json", { outputFile: ".tmp/vitest-report.json" }], new RunSummary()]
        : ["default", new RunSummary()],
    // Timeouts catch a hang, never measure speed: with twice as many files as cores, a test that
    // starts processes gets half the CPU it would alone, so each has three minutes (issue 26).
    testTimeout: 180_000,
    hookTimeout: 180_000,
    projects: [
      {
        extends: true,
        test: {
          name: "units",
          include: UNITS,
          exclude: [...MOCKS_A_MODULE, ...ALONE],
          isolate: false,
        },
      },
      { extends: true, test: { name: "alone", include: ALONE, sequence: { groupOrder: 1 } } },
      {
        extends: true,
        test: {
          name: "processes",
          include: ["packages/*/test/**/*.test.ts", "test/**/*.test.ts", ...MOCKS_A_MODULE],
          exclude: ALONE,
        },
      },
    ],
  },
});
