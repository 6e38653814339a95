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
const BACKENDS = ["sqlite", "postgres", "redis"] as const;

export async function run(): Promise<BenchSection> {
  const rows: BenchRow[] = [];
  const notes: string[] = [];
  for (const backend of BACKENDS) {
    let module: StoreBench;
    try {
      // A computed specifier: a backend's file may not exist yet in this checkout.
      module = (await import(`./${backend}.js`)) as StoreBench;
    } catch (error) {
      if ((error as { code?: string }).code !== "ERR_MODULE_NOT_FOUND") throw error;
      notes.push(`${backend}: bench not written yet`);
      continue;
    }
    const result = await module.rows();
    rows.push(...result.rows);
    notes.push(...result.notes.map((note) => `${backend}: ${note}`));
  }
  return { name: "stores", rows, notes };
}
