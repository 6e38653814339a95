import { relative } from "node:path";
import { BaseSequencer, type TestSpecification } from "vitest/node";
import { FILE_SECONDS } from "./file-seconds.js";

/**
 * Starts the longest test files first, so that no worker is left running a long file alone at
 * the end of the run while the others sit idle (issue 26). Vitest's own sequencer does this
 * only from its cache of the last run's durations; a fresh CI checkout has none, and falls
 * back to file size, which says little here: the longest files are short ones that start
 * processes and databases.
 *
 * A file's weight is its measured seconds (file-seconds.ts), else the cached duration of its
 * last run, else nothing; heavier first, and files of equal weight (the unmeasured ones) keep
 * vitest's own order.
 */
export class HeaviestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const base = await super.sort(files);
    const root = this.ctx.config.root;
    const weight = (spec: TestSpecification): number => {
      const file = relative(root, spec.moduleId).split("\\").join("/");
      const measured = FILE_SECONDS[file];
      if (measured !== undefined) return measured * 1000;
      const cached = this.ctx.cache.getFileTestResults(`${spec.project.name}:${file}`);
      return cached?.duration ?? 0;
    };
    return base
      .map((spec, index) => ({ spec, index, weight: weight(spec) }))
      .sort((a, b) => b.weight - a.weight || a.index - b.index)
      .map(({ spec }) => spec);
  }
}
