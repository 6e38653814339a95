/**
 * No import circle between the files of packages/sqlite/src (there was one between
 * database.ts and group-commit.ts, through the error they both raise; it lives in
 * unavailable.ts now). Relative imports only: the package's own files.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const SRC = fileURLToPath(new URL("../src", import.meta.url));

function importGraph(dir: string): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".ts") && !f.endsWith(".test.ts"))) {
    const text = readFileSync(join(dir, file), "utf8");
    const targets = [...text.matchAll(/from "\.\/([^"]+)\.js"/g)].map((m) => `${m[1]}.ts`);
    graph.set(file, targets);
  }
  return graph;
}

/** Every circle found, as the files along it (first file repeated at the end). */
function circles(graph: Map<string, string[]>): string[][] {
  const found: string[][] = [];
  const done = new Set<string>();
  const visit = (file: string, path: string[]): void => {
    const at = path.indexOf(file);
    if (at >= 0) {
      found.push([...path.slice(at), file]);
      return;
    }
    if (done.has(file)) return;
    for (const next of graph.get(file) ?? []) visit(next, [...path, file]);
    done.add(file);
  };
  for (const file of graph.keys()) visit(file, []);
  return found;
}

describe("packages/sqlite/src", () => {
  it("has no import circle", () => {
    const graph = importGraph(SRC);
    expect(graph.get("act-ledger.ts")).toContain("claim-rows.ts");
    expect(circles(graph)).toEqual([]);
  });

  it("the check finds a circle when there is one", () => {
    const graph = new Map([
      ["a.ts", ["b.ts"]],
      ["b.ts", ["a.ts"]],
    ]);
    expect(circles(graph)).toEqual([["a.ts", "b.ts", "a.ts"]]);
  });
});
