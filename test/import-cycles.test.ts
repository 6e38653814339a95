/**
 * No import circle between the source files of any package (issue 22 named four: server/src
 * through its routes and `app.ts`, mcp/src through `calls.ts` and `call-audit.ts`, sqlite/src
 * between `database.ts` and `group-commit.ts`, and the CLI's audit commands). Every relative
 * import counts, in subfolders and across them, type-only ones too: a type two files share
 * belongs in a file that imports neither.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const PACKAGES = fileURLToPath(new URL("../packages", import.meta.url));
const RELATIVE_IMPORT = /\b(?:from|import)\s*\(?\s*"(\.{1,2}\/[^"]+)\.js"/g;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith(".ts"))
    .filter((entry) => !entry.name.endsWith(".test.ts") && !entry.name.endsWith(".d.ts"))
    .map((entry) => join(entry.parentPath, entry.name));
}

/** Each file of `src` with the files of the same package it imports, by path under `src`. */
function importGraph(src: string): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of sourceFiles(src)) {
    const text = readFileSync(file, "utf8");
    const targets = [...text.matchAll(RELATIVE_IMPORT)].map((m) =>
      relative(src, resolve(dirname(file), `${m[1]}.ts`)),
    );
    graph.set(relative(src, file), targets);
  }
  return graph;
}

/** Every circle found, as the files along it (first file repeated at the end). */
function circles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
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

const packages = readdirSync(PACKAGES, { withFileTypes: true })
  .filter((entry) => entry.isDirectory())
  .map((entry) => entry.name);

describe("import circles", () => {
  it.each(packages)("packages/%s/src has none", (name) => {
    const graph = importGraph(join(PACKAGES, name, "src"));
    expect(graph.size).toBeGreaterThan(0);
    expect(circles(graph)).toEqual([]);
  });

  it("reads imports in subfolders and across them", () => {
    const graph = importGraph(join(PACKAGES, "core", "src"));
    expect(graph.get("kernel/open-index.ts")).toContain("kernel/grant-index.ts");
    expect(graph.get("kernel/open-index.ts")).toContain("contracts/schemas.ts");
  });

  it("finds a circle when there is one", () => {
    const graph = new Map([
      ["a.ts", ["sub/b.ts"]],
      ["sub/b.ts", ["a.ts"]],
      ["c.ts", ["a.ts"]],
    ]);
    expect(circles(graph)).toEqual([["a.ts", "sub/b.ts", "a.ts"]]);
  });
});
