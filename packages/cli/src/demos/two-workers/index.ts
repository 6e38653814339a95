export { CASE_KEYS, type CaseKey, type CaseMode } from "./cases.js";
export { formatTwoWorkersReport } from "./format.js";
export {
  type CaseReport,
  type PhaseMeasure,
  runTwoWorkersDemo,
  type TwoWorkersOptions,
  type TwoWorkersReport,
} from "./run.js";
