import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { expectRefusal, scratch, tessera } from "./support/cli.js";
import { BENCH_RESULTS, copy, seedRun } from "./support/report.js";

describe("tessera report", () => {
  it("runs both demos live through a store, writes the page and prints the run as JSON", () => {
    const dir = scratch();
    const out = join(dir, "nested", "index.html");
    const db = join(dir, "claims.db");
    const run = tessera(
      "report",
      "--out",
      out,
      "--store",
      `sqlite:${db}`,
      "--workers",
      "3",
      "--bench",
      BENCH_RESULTS,
      "--json",
    );
    expect(run.stderr).toContain(`tessera: wrote ${out}: all 9 measured verdicts as expected`);
    expect(run.code).toBe(0);
    const { run: measured, verdicts } = JSON.parse(run.stdout);
    expect(measured.store).toBe(`sqlite:${db}`);
    expect(measured.workers).toBe(3);
    // Three processes raced; one ran, two were refused, through the SQLite store.
    expect(measured.twoWorkers["two-workers-one-id"].after).toMatchObject({
      tool_callbacks: 1,
      reused: 2,
    });
    expect(measured.twoWorkers["two-workers-one-id"].before.tool_callbacks).toBe(3);
    expect(measured.fanout.usageStore).toBe("host");
    expect(verdicts.every((v: { ok: boolean }) => v.ok)).toBe(true);
    const page = readFileSync(out, "utf8");
    expect(page).toContain("Three workers.");
    expect(page).toContain("Benchmark ratios against peers and raw primitives");
    expect(page).toContain(`sqlite:${db}`);
  });

  it("exits 2 with verdict_mismatch on a wrong verdict, and still writes the page marking it", () => {
    const dir = scratch();
    const wrong = copy(seedRun());
    (wrong.twoWorkers["same-id-changed-body"].after as { tool_callbacks: number }).tool_callbacks =
      2;
    const saved = join(dir, "run.json");
    writeFileSync(saved, JSON.stringify({ run: wrong, verdicts: [] }));
    const out = join(dir, "index.html");
    const run = tessera("report", "--results", saved, "--out", out);
    expectRefusal(run, "verdict_mismatch");
    expect(run.stderr).toContain("same-id-changed-body measured something other than expected");
    expect(run.stdout).toContain("1 of 9 measured verdicts FAILED");
    expect(readFileSync(out, "utf8")).toContain(
      "FAILED: 1 of 9 measured verdicts differ from the expected ones.",
    );
  });

  it("renders the seed's run from a saved file with exit 0 (the injection path itself is sound)", () => {
    const dir = scratch();
    const saved = join(dir, "run.json");
    writeFileSync(saved, JSON.stringify({ run: seedRun() }));
    const run = tessera("report", "--results", saved, "--out", join(dir, "p.html"));
    expect(run.code).toBe(0);
  });

  it("does not advertise the saved-run option", () => {
    const help = tessera("report", "--help");
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("--bench <file>");
    expect(help.stdout).not.toContain("--results");
  });

  it.each([
    [["--store", "ftp://nowhere"], "unsupported_store_url"],
    [["--workers", "1"], "invalid_usage"],
    [["--out", ""], "invalid_usage"],
    [["--bench", "/nonexistent/latest.json"], "file_not_found"],
  ])("refuses %j before running anything", (args, code) => {
    const dir = scratch();
    const out = join(dir, "index.html");
    const run = tessera("report", "--out", out, ...args);
    expectRefusal(run, code);
    expect(existsSync(out)).toBe(false);
  });

  it("refuses a file that is not benchmark results", () => {
    const dir = scratch();
    const bench = join(dir, "bench.json");
    writeFileSync(bench, JSON.stringify({ at: "now", sections: "no" }));
    expectRefusal(
      tessera("report", "--bench", bench, "--out", join(dir, "p.html")),
      "invalid_input",
    );
  });

  it("refuses an out path it cannot write, with a stable code", () => {
    const dir = scratch();
    const saved = join(dir, "run.json");
    writeFileSync(saved, JSON.stringify({ run: seedRun() }));
    writeFileSync(join(dir, "file"), "");
    const run = tessera("report", "--results", saved, "--out", join(dir, "file", "index.html"));
    expectRefusal(run, "invalid_usage");
    expect(run.stderr).toContain("cannot write the page");
  });
});
