import type { BenchSection } from "../report.js";

/** Placeholder until this section is written: it measures nothing and says so. */
export async function run(): Promise<BenchSection> {
  return { name: "a2ui", rows: [], notes: ["not written yet"] };
}
