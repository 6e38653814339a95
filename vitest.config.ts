import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["packages/*/src/**/*.test.ts", "packages/*/test/**/*.test.ts", "test/**/*.test.ts"],
    pool: "forks",
    // Under CI a JSON report too, from which .ci/run prints its closing "N passed, N failed".
    reporters:
      process.env.CI === "true"
        ? ["default", ["json", { outputFile: ".tmp/vitest-report.json" }]]
        : ["default"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
