import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
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
  roundtrips: () => import("./roundtrips/index.js"),
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
// An empty --only (an unset shell variable) is a slip, not "everything": the full run takes
// many minutes and replaces bench/results/latest.json.
if (values.only !== undefined && values.only.trim() === "") {
  usageError("--only names no section");
}
const wanted = values.only !== undefined ? values.only.split(",") : Object.keys(SECTIONS);
const unknown = wanted.filter((name) => SECTIONS[name] === undefined);
if (unknown.length > 0) usageError(`unknown section ${unknown.map((n) => `"${n}"`).join(", ")}`);

const results: BenchSection[] = [];
for (const name of wanted) {
  const load = SECTIONS[name] as () => Promise<BenchModule>;
  const section = await (await load()).run();
  results.push(section);
  process.stdout.write(`${formatSection(section)}\n`);
}

const at = new Date().toISOString();
const dir = new URL("../results/", import.meta.url);
mkdirSync(dir, { recursive: true });
const latest = new URL("latest.json", dir);
// Each section keeps the time it ran: with --only, latest.json keeps the other sections of
// the last run and replaces these, so the report page always has every section.
const fresh: DatedSection[] = results.map((section) => ({ ...section, at }));
const kept = values.only === undefined ? [] : previousSections(latest);
const sections = Object.keys(SECTIONS).flatMap((name) => {
  const section = fresh.find((s) => s.name === name) ?? kept.find((s) => s.name === name);
  return section === undefined ? [] : [section];
});
const machine = { cpus: os.cpus().length, model: os.cpus()[0]?.model, node: process.version };
writeFileSync(latest, `${JSON.stringify({ at, machine, sections }, null, 2)}\n`);
writeFileSync(
  new URL("latest.md", dir),
  `# Benchmark results\n\n${machine.cpus} CPUs (${machine.model}), Node ${machine.node}; each section with the time it ran\n\n\`\`\`\n${sections.map((s) => `(${s.at})\n${formatSection(s)}`).join("\n")}\`\`\`\n`,
);
writeFileSync(
  new URL(`${at.slice(0, 10)}-${wanted.join("-")}.json`, dir),
  `${JSON.stringify({ at, machine, sections: fresh }, null, 2)}\n`,
);
process.stdout.write(
  `results written to bench/results/latest.json and latest.md${
    kept.length > 0
      ? ` (sections not run now kept from earlier runs: ${
          sections
            .filter((s) => !fresh.includes(s))
            .map((s) => s.name)
            .join(", ") || "none"
        })`
      : ""
  }\n`,
);

type DatedSection = BenchSection & { readonly at: string };

/** The sections of the last latest.json, each dated (by its own `at`, else the file's). */
function previousSections(file: URL): DatedSection[] {
  try {
    const last = JSON.parse(readFileSync(file, "utf8")) as {
      at?: string;
      sections?: (BenchSection & { at?: string })[];
    };
    return (last.sections ?? []).map((s) => ({ ...s, at: s.at ?? last.at ?? "unknown" }));
  } catch {
    return [];
  }
}
