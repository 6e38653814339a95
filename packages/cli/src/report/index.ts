export { type BenchResults, readBenchResults } from "./bench.js";
export { escapeHtml, html } from "./html.js";
export { type RenderedReport, renderReport } from "./page.js";
export { collectRun, describeStore, type RunDemos, runDemos, writePage } from "./run.js";
export type { ReportRun } from "./types.js";
export { allVerdicts, type Difference, differences, type Verdict } from "./verdicts.js";
