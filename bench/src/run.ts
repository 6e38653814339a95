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

const { values } = parseArgs({ options: { only: { type: "string" } } });
const wanted = values.only ? values.only.split(",") : Object.keys(SECTIONS);

const results: BenchSection[] = [];
for (const name of wanted) {
  const load = SECTIONS[name];
  if (!load) throw new Error(`unknown bench section "${name}"; known: ${Object.keys(SECTIONS)}`);
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
