/**
 * What one `tessera report` run measured: the two demos' own results, unchanged, and where
 * and when they ran. The page and the verdicts are computed from this and nothing else.
 */
import type { FanoutReport } from "../demos/fanout/index.js";
import type { CaseKey, PhaseMeasure, TwoWorkersReport } from "../demos/two-workers/index.js";
import type { BenchResults } from "./bench.js";

export type { BenchResults, CaseKey, FanoutReport, PhaseMeasure, TwoWorkersReport };

export interface MachineInfo {
  readonly platform: string;
  readonly release: string;
  readonly arch: string;
  readonly cpus: number;
  readonly model: string;
  readonly node: string;
}

export interface ReportRun {
  /** When the run started (ISO 8601) and how long both demos took. */
  readonly startedAt: string;
  readonly durationMs: number;
  readonly machine: MachineInfo;
  /** Processes per parallel two-workers case, as requested. */
  readonly workers: number;
  /**
   * The shared store both demos used (credentials and query removed), or null: a fresh
   * private claim directory per case and an in-memory usage store per scene.
   */
  readonly store: string | null;
  readonly twoWorkers: TwoWorkersReport;
  readonly fanout: FanoutReport;
  readonly bench?: BenchResults;
}
