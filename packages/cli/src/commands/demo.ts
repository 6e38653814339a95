import { Command } from "commander";
import { formatFanoutReport, runFanoutDemo } from "../demos/fanout/index.js";
import { formatTwoWorkersReport, runTwoWorkersDemo } from "../demos/two-workers/index.js";
import { nonEmpty, wholeNumber } from "../options.js";
import { printJson } from "../output.js";
import { openStoresByUrl } from "../stores.js";

interface FanoutOptions {
  recipients: number;
  json?: boolean;
  store?: string;
}

interface TwoWorkersOptions {
  workers: number;
  json?: boolean;
  store?: string;
}

export function demoCommand(): Command {
  const demo = new Command("demo").description("run a demo; every figure is measured from the run");

  demo
    .command("fanout")
    .description("recipient-scoped single-use messaging: the five scenes")
    .option("--recipients <n>", "colleagues asked in scene 1", wholeNumber(1, 100_000), 3)
    .option(
      "--store <url>",
      "count ticket use in this store (sqlite:, postgres://, redis://)",
      nonEmpty,
    )
    .option("--json", "print the results as JSON")
    .action(async (options: FanoutOptions) => {
      const stores = options.store ? await openStoresByUrl(options.store) : undefined;
      try {
        const report = await runFanoutDemo({
          recipients: options.recipients,
          ...(stores ? { usage: () => stores.usage } : {}),
        });
        if (options.json) printJson(report);
        else process.stdout.write(formatFanoutReport(report));
      } finally {
        await stores?.close();
      }
    });

  demo
    .command("two-workers")
    .description("two worker processes, one function call ID: before and after a shared claim")
    .option("--workers <n>", "processes in each parallel case", wholeNumber(2, 64), 2)
    .option(
      "--store <url>",
      "share claims through this store instead of a private directory",
      nonEmpty,
    )
    .option("--json", "print the results as JSON")
    .action(async (options: TwoWorkersOptions) => {
      const report = await runTwoWorkersDemo({
        workers: options.workers,
        ...(options.store ? { store: options.store } : {}),
      });
      if (options.json) printJson(report);
      else process.stdout.write(formatTwoWorkersReport(report));
    });

  return demo;
}
