import { defineConfig } from "vitest/config";
import { RunSummary } from "./test/support/run-summary.js";

export default defineConfig({
  test: {
    include: ["packages/*/src/**/*.test.ts", "packages/*/test/**/*.test.ts", "test/**/*.test.ts"],
    pool: "forks",
    // Under CI a JSON report too, from which .ci/run prints its closing "N passed, N failed".
    // And, last, what the run skipped and why, and its expected failures (run-summary.ts).
    reporters:
      process.env.CI === "true"
        ? ["default", ["json", { outputFile: ".tmp/vitest-report.json" }], new RunSummary()]
        : ["default", new RunSummary()],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
