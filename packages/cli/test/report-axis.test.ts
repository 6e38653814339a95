import { describe, expect, it } from "vitest";
import { benchSection, labelExtent } from "../src/report/bench.js";

/** A bench file whose ratios span 0.05× to 500×: decades from 0.01× to 1,000×. */
function bench(ratios: readonly number[]) {
  return {
    at: "2026-12-01T00:00:00.000Z",
    machine: { cpus: 2, model: "test", node: "v20" },
    sections: [
      {
        name: "s",
        rows: ratios.map((ratio, i) => ({
          name: `row ${i}`,
          unit: "ops/s",
          value: ratio,
          baseline: { name: "base", value: 1 },
          ratio,
        })),
      },
    ],
  };
}

function axisLabels(ratios: readonly number[]) {
  const text = benchSection(bench(ratios)).text;
  const axis = /<svg class="ratio-axis"[^>]*>(.*?)<\/svg>/s.exec(text)?.[1] ?? "";
  return [...axis.matchAll(/<text x="([\d.]+)" y="11" text-anchor="(\w+)">([^<]+)<\/text>/g)].map(
    (m) => ({
      x: Number(m[1]),
      anchor: m[2] as "start" | "middle" | "end",
      label: m[3] as string,
    }),
  );
}

describe("the bench chart's axis labels", () => {
  it.each([[[0.05, 500]], [[0.05, 5]], [[0.5, 900]], [[0.002, 9000]]])(
    "never overlap, and always name both ends and 1× (ratios %j)",
    (ratios) => {
      const labels = axisLabels(ratios);
      const extents = labels.map((l) => labelExtent(l.x, l.label.replace("&#215;", "×"), l.anchor));
      for (let i = 1; i < extents.length; i++) {
        expect((extents[i] as [number, number])[0]).toBeGreaterThan(
          (extents[i - 1] as [number, number])[1],
        );
      }
      const names = labels.map((l) => l.label);
      expect(names).toContain("1×");
      expect(names[0]).toMatch(/^0\.0*1×$/);
      expect(names.at(-1)).toMatch(/^1(0|,000)*×$/);
    },
  );

  it("keeps 100× and 1,000× apart: the pair that ran into each other", () => {
    const labels = axisLabels([0.05, 500]).map((l) => l.label);
    expect(labels.at(-1)).toBe("1,000×");
    expect(labels).not.toContain("100×");
  });
});
