/**
 * The CLI's start-up: `tessera --version` beside a bare `node -e ""`, both run as child
 * processes in the same run, alternating (A B A B …) so a neighbour's load falls on both.
 * Before the CLI loaded only the command it runs, `--version` took 1 to 2.3 s, about 7× a bare
 * Node start; the target is at most 3×.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { median } from "../measure.js";
import type { BenchSection } from "../report.js";

const BIN = fileURLToPath(new URL("../../../packages/cli/dist/bin.js", import.meta.url));
const RUNS = 15;
const TARGET_RATIO = 3;

function timed(args: readonly string[]): number {
  const started = process.hrtime.bigint();
  const run = spawnSync(process.execPath, args, { stdio: "ignore" });
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  if (run.status !== 0) throw new Error(`node ${args.join(" ")} exited ${run.status}`);
  return ms;
}

export async function run(): Promise<BenchSection> {
  const cli: number[] = [];
  const bare: number[] = [];
  // One of each first, not counted: the file cache is warm for both before timing.
  timed([BIN, "--version"]);
  timed(["-e", ""]);
  for (let i = 0; i < RUNS; i++) {
    cli.push(timed([BIN, "--version"]));
    bare.push(timed(["-e", ""]));
  }
  const value = median(cli);
  const baseline = median(bare);
  const ratio = value / baseline;
  return {
    name: "cli",
    rows: [
      {
        name: "tessera --version (wall, median)",
        unit: "ms",
        value,
        baseline: { name: 'node -e ""', value: baseline },
        ratio,
        ratioMeaning: "tessera --version time / bare node start (lower is better)",
        target: `≤ ${TARGET_RATIO}× node -e ""`,
        met: ratio <= TARGET_RATIO,
      },
    ],
    notes: [`${RUNS} runs of each, alternating, medians compared`],
  };
}
