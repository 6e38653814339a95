import { TesseraError } from "@tessera/core";
import { z } from "zod";
import { readNamedFile } from "../files.js";
import { type Html, html } from "./html.js";

/**
 * The benchmark results file (`bench/results/latest.json`, written by `npm run bench`): only
 * the fields the chart reads are checked; the rest is left alone.
 */
const row = z.object({
  name: z.string(),
  unit: z.string(),
  value: z.number(),
  baseline: z.object({ name: z.string(), value: z.number() }).optional(),
  ratio: z.number().positive().optional(),
  ratioMeaning: z.string().optional(),
  target: z.string().optional(),
  met: z.boolean().optional(),
});
const results = z.object({
  at: z.string(),
  machine: z.object({ cpus: z.number(), model: z.string(), node: z.string() }),
  sections: z.array(z.object({ name: z.string(), rows: z.array(row) })),
});
export type BenchResults = z.infer<typeof results>;

export function readBenchResults(path: string): BenchResults {
  const text = readNamedFile(path, "benchmark results file", "invalid_input");
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new TesseraError("invalid_input", `the benchmark results at ${path} are not JSON`, {
      cause: error,
    });
  }
  const checked = results.safeParse(parsed);
  if (!checked.success) {
    throw new TesseraError(
      "invalid_input",
      `the file at ${path} is not a benchmark results file (bench/results/latest.json): ${checked.error.issues[0]?.path.join(".") || "top level"} is wrong`,
    );
  }
  return checked.data;
}

export function formatRatio(ratio: number): string {
  // Small ratios keep three decimals so 0.012× and 0.018× do not both print as 0.01×.
  const digits = ratio < 0.1 ? 3 : ratio < 10 ? 2 : ratio < 100 ? 1 : 0;
  return `${ratio.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits })}×`;
}

/** Drawn at 1 SVG unit per CSS pixel (the bar is 14rem wide), so its labels are not stretched. */
const WIDTH = 224;

/**
 * The chart's one axis, logarithmic: the ratios run from under 1× (a store's end-to-end path
 * against its bare primitive) to hundreds (a peer library), and 1× is parity. Bars start at
 * 1× and run right when ours is faster, left when slower; a faint line marks each decade.
 */
function axis(ratios: readonly number[]) {
  const low = Math.floor(Math.log10(Math.min(0.5, ...ratios)));
  const high = Math.ceil(Math.log10(Math.max(2, ...ratios)));
  const pad = 6; // room for the end labels
  const x = (r: number) => pad + ((Math.log10(r) - low) / (high - low)) * (WIDTH - 2 * pad);
  const decades = Array.from({ length: high - low + 1 }, (_, i) => 10 ** (low + i));
  return { low: 10 ** low, high: 10 ** high, x, decades };
}

const decadeLabel = (d: number) => `${d >= 1 ? d.toLocaleString("en-US") : String(d)}×`;

function bar(ratio: number, scale: ReturnType<typeof axis>): Html {
  const one = scale.x(1);
  const end = scale.x(ratio);
  const from = Math.min(one, end);
  const length = Math.max(Math.abs(end - one), 1.5);
  const kind = ratio >= 1 ? "ahead" : "behind";
  return html`<svg class="ratio-bar" viewBox="0 0 ${WIDTH} 14" aria-hidden="true" focusable="false">${scale.decades.map(
    (d) =>
      html`<line class="${d === 1 ? "parity" : "decade"}" x1="${scale.x(d).toFixed(1)}" x2="${scale.x(d).toFixed(1)}" y1="0" y2="14"></line>`,
  )}<rect class="${kind}" x="${from.toFixed(1)}" y="3" width="${length.toFixed(1)}" height="8"></rect></svg>`;
}

/** The axis labels' font size (styles.ts) and a generous width per character, in SVG units. */
const LABEL_FONT = 10;
const LABEL_CHAR_EM = 0.62;
const LABEL_GAP = 4;

type Anchor = "start" | "middle" | "end";

/** Where a label's text runs, from its anchor point, by the generous width estimate. */
export function labelExtent(x: number, text: string, anchor: Anchor): [number, number] {
  const width = text.length * LABEL_CHAR_EM * LABEL_FONT;
  const start = anchor === "start" ? x : anchor === "end" ? x - width : x - width / 2;
  return [start, start + width];
}

/**
 * The decade labels above the bars' column (the table header says the same in words). With
 * six decades in 14rem, "100×" and an end-anchored "1,000×" ran into each other: the two ends
 * and 1× are always labelled, and every other decade only where its label clears the ones
 * already placed (its line stays on every bar).
 */
function axisLabels(scale: ReturnType<typeof axis>): Html {
  const last = scale.decades.length - 1;
  const labels = scale.decades.map((d, i) => {
    const anchor: Anchor = i === 0 ? "start" : i === last ? "end" : "middle";
    const text = decadeLabel(d);
    const x = scale.x(d);
    return {
      x,
      text,
      anchor,
      extent: labelExtent(x, text, anchor),
      must: i === 0 || i === last || d === 1,
    };
  });
  const kept: typeof labels = labels.filter((l) => l.must);
  for (const label of labels) {
    if (label.must) continue;
    const clear = kept.every(
      (k) =>
        label.extent[1] + LABEL_GAP <= k.extent[0] || k.extent[1] + LABEL_GAP <= label.extent[0],
    );
    if (clear) kept.push(label);
  }
  kept.sort((a, b) => a.x - b.x);
  return html`<svg class="ratio-axis" viewBox="0 0 ${WIDTH} 14" aria-hidden="true" focusable="false">${kept.map(
    (l) => html`<text x="${l.x.toFixed(1)}" y="11" text-anchor="${l.anchor}">${l.text}</text>`,
  )}</svg>`;
}

type RatioRow = BenchResults["sections"][number]["rows"][number] & {
  ratio: number;
  baseline: { name: string; value: number };
};

function ratioRow(section: string, r: RatioRow, scale: ReturnType<typeof axis>): Html {
  return html`<tr>
<th scope="row">${r.name}</th>
<td data-label="Baseline"><span>${r.baseline.name}</span></td>
<td data-label="Ratio" class="ratio-cell"><span>${bar(r.ratio, scale)}<span class="ratio-value" data-ratio="${section}|${r.name}">${formatRatio(r.ratio)}</span></span></td>
<td data-label="Target"><span>${r.target === undefined ? "—" : html`${r.target}: ${r.met ? "met" : html`<strong class="missed">not met</strong>`}`}</span></td>
</tr>`;
}

export function benchSection(bench: BenchResults): Html {
  const sections = bench.sections
    .map((section) => ({
      name: section.name,
      rows: section.rows.filter(
        (r): r is RatioRow => r.ratio !== undefined && r.baseline !== undefined,
      ),
    }))
    .filter((section) => section.rows.length > 0);
  const ratios = sections.flatMap((s) => s.rows.map((r) => r.ratio));
  if (ratios.length === 0) {
    return html`<section class="bench" aria-labelledby="bench-title"><h2 id="bench-title">Benchmark ratios</h2><p>The benchmark results file holds no ratios.</p></section>`;
  }
  const scale = axis(ratios);
  return html`<section class="bench" aria-labelledby="bench-title">
<p class="kicker">Each against its baseline, measured in the same run</p>
<h2 id="bench-title">Benchmark ratios against peers and raw primitives</h2>
<p>From the benchmark run of <time datetime="${bench.at}">${bench.at}</time>, ${bench.machine.cpus} CPUs (${bench.machine.model}), Node ${bench.machine.node}. Each ratio compares ours with the peer library or the bare store primitive measured in the same run: higher is better for Tessera, 1× is parity. The bars share one logarithmic axis from ${decadeLabel(scale.low)} to ${decadeLabel(scale.high)} and start at 1×.</p>
<table class="ratios stack">
<caption>Ratios by part, from ${bench.sections.length} benchmark sections</caption>
<thead><tr><th scope="col">Benchmark</th><th scope="col">Baseline</th><th scope="col">Ratio (log axis)${axisLabels(scale)}</th><th scope="col">Target</th></tr></thead>
${sections.map(
  (section) =>
    html`<tbody><tr class="group"><th scope="rowgroup" colspan="4">${section.name}</th></tr>${section.rows.map((r) => ratioRow(section.name, r, scale))}</tbody>`,
)}
</table>
</section>`;
}
