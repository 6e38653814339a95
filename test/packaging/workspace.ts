import { readdirSync, readFileSync, statSync } from "node:fs";
import { builtinModules } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

/** What the packaging check reads of a package.json. */
export interface Manifest {
  readonly name: string;
  readonly version: string;
  readonly private?: boolean;
  readonly dependencies?: Record<string, string>;
  readonly peerDependencies?: Record<string, string>;
  readonly optionalDependencies?: Record<string, string>;
}

export interface WorkspacePackage {
  readonly dir: string;
  readonly manifest: Manifest;
}

export const repoRoot = fileURLToPath(new URL("../../", import.meta.url));

/** Every workspace package (packages, examples, bench), as the root package.json lists them. */
export function workspacePackages(root = repoRoot): WorkspacePackage[] {
  const rootManifest = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")) as {
    workspaces: string[];
  };
  const dirs = rootManifest.workspaces.flatMap((pattern) => {
    if (!pattern.endsWith("/*")) return [path.join(root, pattern)];
    const parent = path.join(root, pattern.slice(0, -2));
    return readdirSync(parent)
      .map((name) => path.join(parent, name))
      .filter((dir) => statSync(dir).isDirectory());
  });
  return dirs.map((dir) => ({
    dir,
    manifest: JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8")) as Manifest,
  }));
}

/** Whatever a published package may import at run time without declaring it. */
function isBuiltin(specifier: string): boolean {
  return specifier.startsWith("node:") || builtinModules.includes(specifier);
}

/** `@scope/name/sub` → `@scope/name`; `name/sub` → `name`. */
export function packageNameOf(specifier: string): string {
  const parts = specifier.split("/");
  return specifier.startsWith("@") ? parts.slice(0, 2).join("/") : (parts[0] ?? specifier);
}

/**
 * Bare specifiers of static and dynamic imports in emitted JavaScript, read by TypeScript's own
 * pre-processor so that comments and strings never count as imports.
 */
export function bareImports(source: string): Set<string> {
  const found = new Set<string>();
  for (const { fileName } of ts.preProcessFile(source, true, true).importedFiles) {
    if (!fileName.startsWith(".") && !fileName.startsWith("/") && !isBuiltin(fileName)) {
      found.add(packageNameOf(fileName));
    }
  }
  return found;
}

function jsFilesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: "utf8" })
    .filter((name) => name.endsWith(".js"))
    .map((name) => path.join(dir, name));
}

/**
 * What stops a user at the door, read from the manifests and the built output: a dependency
 * on a private workspace package (404 from the registry) and an import that no dependency,
 * peer or optional dependency declares (works in the workspace by hoisting, fails installed).
 */
export function packagingProblems(
  pkg: WorkspacePackage,
  privateNames: ReadonlySet<string>,
): string[] {
  const { manifest } = pkg;
  const problems: string[] = [];
  const runtime = {
    ...manifest.dependencies,
    ...manifest.peerDependencies,
    ...manifest.optionalDependencies,
  };
  for (const name of Object.keys(runtime)) {
    if (privateNames.has(name)) {
      problems.push(`${manifest.name} depends on the private workspace package ${name}`);
    }
  }
  for (const file of jsFilesUnder(path.join(pkg.dir, "dist"))) {
    for (const name of bareImports(readFileSync(file, "utf8"))) {
      if (name !== manifest.name && !(name in runtime)) {
        const where = path.relative(pkg.dir, file);
        problems.push(`${manifest.name} imports ${name} in ${where} without declaring it`);
      }
    }
  }
  return problems;
}

/** ```ts blocks of a Markdown file, in order. */
export function typescriptBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1] ?? "");
}

/** Apparent size of a tree in bytes (what a user downloads and unpacks). */
export function treeBytes(dir: string): number {
  let total = 0;
  for (const name of readdirSync(dir, { recursive: true, encoding: "utf8" })) {
    const stats = statSync(path.join(dir, name), { throwIfNoEntry: false });
    if (stats?.isFile()) total += stats.size;
  }
  return total;
}
