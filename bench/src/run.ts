import { mkdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import { parseArgs } from "node:util";
import type { BenchModule, BenchSection } from "./report.js";
import { formatSection } from "./table.js";

/**
 * `npm run bench [-- --only core,a2ui,stores]`: runs each section, prints a table per
 * section and writes every figure as JSON to bench/results/ (latest.json and a dated copy).
 */
const SECTIONS: Record<string, () => Promise<BenchModule>> = {
  core: () => import("./core/index.js"),
  a2ui: () => import("./a2ui/index.js"),
  stores: () => import("./stores/index.js"),
  mcp: () => import("./mcp/index.js"),
  service: () => import("./service/index.js"),
  cli: () => import("./cli/index.js"),
};

const USAGE = `usage: npm run bench [-- --only <sections>]

Runs the benchmark sections, prints a table each and writes bench/results/latest.json and
latest.md. Sections (comma-separated for --only): ${Object.keys(SECTIONS).join(", ")}.
PostgreSQL and Redis rows need TESSERA_PG_URL and TESSERA_REDIS_URL.
`;

function usageError(message: string): never {
  process.stderr.write(`bench: ${message}\n\n${USAGE}`);
  process.exit(2);
}

let values: { only?: string | undefined; help?: boolean | undefined };
try {
  ({ values } = parseArgs({
    options: { only: { type: "string" }, help: { type: "boolean", short: "h" } },
  }));
} catch (error) {
  usageError((error as Error).message);
}
if (values.help === true) {
  process.stdout.write(USAGE);
  process.exit(0);
}
const wanted = values.only ? values.only.split(",") : Object.keys(SECTIONS);
const unknown = wanted.filter((name) => SECTIONS[name] === undefined);
if (unknown.length > 0) usageError(`unknown section ${unknown.map((n) => `"${n}"`).join(", ")}`);

const results: BenchSection[] = [];
for (const name of wanted) {
  const load = SECTIONS[name] as () => Promise<BenchModule>;
  const section = await (await load()).run();
  results.push(section);
  process.stdout.write(`${formatSection(section)}\n`);
}

const report = {
  at: new Date().toISOString(),
  machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, node: process.version },
  sections: results,
};
const dir = new URL("../results/", import.meta.url);
mkdirSync(dir, { recursive: true });
const json = `${JSON.stringify(report, null, 2)}\n`;
writeFileSync(new URL("latest.json", dir), json);
writeFileSync(
  new URL("latest.md", dir),
  `# Benchmark results\n\n${report.at}, ${report.machine.cpus} CPUs (${report.machine.model}), Node ${report.machine.node}\n\n\`\`\`\n${results.map(formatSection).join("\n")}\`\`\`\n`,
);
writeFileSync(new URL(`${report.at.slice(0, 10)}-${wanted.join("-")}.json`, dir), json);
process.stdout.write("results written to bench/results/latest.json and latest.md\n");
