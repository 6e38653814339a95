import { storePackageFor, TesseraError } from "@tessera/core";
import { Command, Option } from "commander";
import { readNamedFile } from "../files.js";
import { nonEmpty, wholeNumber } from "../options.js";
import { printJson } from "../output.js";
import { type BenchResults, readBenchResults } from "../report/bench.js";
import { renderReport } from "../report/page.js";
import { collectRun, writePage } from "../report/run.js";
import type { ReportRun } from "../report/types.js";

interface ReportOptions {
  out: string;
  store?: string;
  workers: number;
  bench?: string;
  json?: boolean;
  results?: string;
}

/**
 * A run saved by `tessera report --json` (its `run` field). The verdicts are computed again
 * from the measurements, never read from the file, so a saved run cannot vouch for itself.
 */
function savedRun(path: string, bench: BenchResults | undefined): ReportRun {
  const text = readNamedFile(path, "saved report run", "invalid_input");
  let run: unknown;
  try {
    run = (JSON.parse(text) as { run?: unknown }).run;
  } catch (error) {
    throw new TesseraError("invalid_input", `the saved run at ${path} is not JSON`, {
      cause: error,
    });
  }
  const shaped = run as Partial<ReportRun> | undefined;
  if (
    typeof shaped !== "object" ||
    shaped === null ||
    typeof shaped.twoWorkers !== "object" ||
    !Array.isArray(shaped.fanout?.scenes) ||
    typeof shaped.machine !== "object"
  ) {
    throw new TesseraError("invalid_input", `the file at ${path} is not a saved report run`);
  }
  const saved = shaped as ReportRun;
  return bench ? { ...saved, bench } : saved;
}

export function reportCommand(): Command {
  return (
    new Command("report")
      .description(
        "run the two-workers cases and the fan-out scenes live and write the measured-verdicts page (one self-contained HTML file)",
      )
      .option("--out <file>", "where to write the page", nonEmpty, "report/index.html")
      .option(
        "--store <url>",
        "share claims and count tickets in this store (sqlite:, postgres://, redis://) instead of a private directory and memory",
        nonEmpty,
      )
      .option("--workers <n>", "processes in each parallel case", wholeNumber(2, 64), 2)
      .option(
        "--bench <file>",
        "add the benchmark ratios from this results file (bench/results/latest.json)",
        nonEmpty,
      )
      .option("--json", "also print the run's measurements and verdicts as JSON")
      // Renders a run saved with --json instead of running the demos: how the tests hand the
      // command a deliberately wrong measurement. Not part of the documented surface.
      .addOption(new Option("--results <file>").argParser(nonEmpty).hideHelp())
      .action(async (options: ReportOptions) => {
        if (options.store) storePackageFor(options.store); // refuse an unknown scheme before spawning
        const bench = options.bench ? readBenchResults(options.bench) : undefined;
        const run = options.results
          ? savedRun(options.results, bench)
          : await collectRun({
              workers: options.workers,
              ...(options.store ? { store: options.store } : {}),
              ...(bench ? { bench } : {}),
            });
        const page = renderReport(run);
        writePage(options.out, page.html);
        if (options.json) printJson({ run, verdicts: page.verdicts });
        const total = page.verdicts.length;
        const summary =
          page.failed.length === 0
            ? `all ${total} measured verdicts as expected`
            : `${page.failed.length} of ${total} measured verdicts FAILED`;
        // With --json, standard output holds the JSON alone.
        (options.json ? process.stderr : process.stdout).write(
          `tessera: wrote ${options.out}: ${summary}\n`,
        );
        if (page.failed.length > 0) {
          throw new TesseraError(
            "verdict_mismatch",
            `${page.failed.map((v) => v.id).join(", ")} measured something other than expected; ${options.out} marks each one`,
          );
        }
      })
  );
}
