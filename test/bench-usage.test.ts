/**
 * The bench's command line refuses what names no section, before anything runs: a full run
 * takes many minutes and replaces bench/results/latest.json.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const RUN = fileURLToPath(new URL("../bench/dist/run.js", import.meta.url));

function bench(...args: string[]) {
  const run = spawnSync(process.execPath, [RUN, ...args], { encoding: "utf8", timeout: 60_000 });
  return { code: run.status, stdout: run.stdout, stderr: run.stderr };
}

describe("npm run bench -- --only", () => {
  it.each([[["--only", ""]], [["--only="]], [["--only", "  "]]])(
    "refuses an empty section list (%j) with a usage error, running nothing",
    (args) => {
      const run = bench(...args);
      expect(run.code).toBe(2);
      expect(run.stderr).toContain("--only names no section");
      expect(run.stdout).toBe("");
    },
  );

  it("refuses an unknown section by name", () => {
    const run = bench("--only", "core,nope");
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('unknown section "nope"');
  });
});
