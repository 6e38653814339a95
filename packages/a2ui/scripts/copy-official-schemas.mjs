#!/usr/bin/env node
// Copies the official A2UI v1.0 JSON schemas from the pinned `@a2ui/web_core` (a
// devDependency) into this package's `schemas/` folder, so that installing `@tessera/a2ui`
// does not pull a renderer (lit, date-fns, a second zod) only to read four JSON files.
// The copy is byte for byte; `src/schemas/official.test.ts` checks it against the source.
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const SOURCE_PACKAGE = "@a2ui/web_core";
export const SCHEMA_FILES = [
  "common_types.json",
  "agent_to_renderer.json",
  "renderer_to_agent.json",
  "catalog_definition.json",
];

const packageDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const manifest = JSON.parse(readFileSync(path.join(packageDir, "package.json"), "utf8"));
const pinned = manifest.devDependencies?.[SOURCE_PACKAGE];

function sourceRoot() {
  const require = createRequire(path.join(packageDir, "package.json"));
  let dir = path.dirname(require.resolve(SOURCE_PACKAGE));
  for (;;) {
    try {
      const found = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8"));
      if (found.name === SOURCE_PACKAGE) return { dir, version: found.version };
    } catch {
      // no package.json at this level: keep walking up
    }
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`${SOURCE_PACKAGE} is not installed`);
    dir = parent;
  }
}

const source = sourceRoot();
if (source.version !== pinned) {
  // A new schema release is adopted by a deliberate, tested upgrade of the exact pin.
  console.error(
    `copy-official-schemas: installed ${SOURCE_PACKAGE} ${source.version} is not the pinned ${pinned}`,
  );
  process.exit(1);
}
const target = path.join(packageDir, "schemas", "v1_0");
mkdirSync(target, { recursive: true });
for (const name of SCHEMA_FILES) {
  copyFileSync(path.join(source.dir, "src", "v1_0", "schemas", name), path.join(target, name));
}
writeFileSync(
  path.join(target, "source.json"),
  `${JSON.stringify({ package: SOURCE_PACKAGE, version: source.version, files: SCHEMA_FILES }, null, 2)}\n`,
);
