import type { BenchRow, BenchSection } from "./report.js";

function figure(value: number, unit: BenchRow["unit"]): string {
  const rounded = value >= 100 ? Math.round(value).toLocaleString("en-US") : value.toFixed(2);
  return `${rounded} ${unit}`;
}

/** A plain-text table of one section, for the terminal. */
export function formatSection(section: BenchSection): string {
  const header = ["benchmark", "value", "baseline", "ratio", "target", "met"];
  const rows = section.rows.map((row) => [
    row.name,
    figure(row.value, row.unit),
    row.baseline ? `${row.baseline.name}: ${figure(row.baseline.value, row.unit)}` : "",
    row.ratio === undefined ? "" : `${row.ratio.toFixed(2)}×`,
    row.target ?? "",
    row.met === undefined ? "" : row.met ? "yes" : "NO",
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join("  ");
  const out = [`## ${section.name}`, line(header), line(widths.map((w) => "-".repeat(w)))];
  for (const row of rows) out.push(line(row));
  for (const note of section.notes) out.push(`note: ${note}`);
  return `${out.join("\n")}\n`;
}
