import type { BenchRow, BenchSection } from "../report.js";

interface StoreBench {
  rows(): Promise<{ rows: BenchRow[]; notes: string[] }>;
}

/**
 * One section for every backend: each module measures its store beside the raw primitive
 * issued with the same client in the same run. The PostgreSQL and Redis modules are written
 * separately; until one exists (or when its service is not reachable) the section says so
 * in a note instead of failing the whole bench.
 */
// "one-shot", "acts" and "pg-cpu" are not backends: their modules measure one-shot decisions,
// the act ledger beside the old ports on every backend set up, and what an act costs the
// PostgreSQL server beside one raw insert.
const BACKENDS = ["sqlite", "postgres", "redis", "one-shot", "acts", "pg-cpu"] as const;

export async function run(): Promise<BenchSection> {
  const rows: BenchRow[] = [];
  const notes: string[] = [];
  for (const backend of BACKENDS) {
    const file = `./${backend}.js`;
    let module: StoreBench;
    try {
      // A computed specifier: a backend's file may not exist yet in this checkout.
      module = (await import(file)) as StoreBench;
    } catch (error) {
      const missing =
        (error as { code?: string }).code === "ERR_MODULE_NOT_FOUND" &&
        String((error as Error).message).includes(`/stores/${backend}.js`);
      if (!missing) throw error;
      notes.push(`${backend}: bench not written yet`);
      continue;
    }
    try {
      const result = await module.rows();
      rows.push(...result.rows);
      notes.push(...result.notes.map((note) => `${backend}: ${note}`));
    } catch (error) {
      // One backend failing (its service down) must not throw away the others' figures;
      // the failure is reported in the section, not hidden.
      notes.push(`${backend}: FAILED, no figures: ${(error as Error).message}`);
    }
  }
  return { name: "stores", rows, notes };
}
