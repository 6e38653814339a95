export { formatFanoutReport } from "./format.js";
export type { FanoutLine, FanoutReport, FanoutScene } from "./report.js";
export { type FanoutOptions, runFanoutDemo } from "./run.js";
