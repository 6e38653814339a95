import { execFileSync } from "node:child_process";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  packagingProblems,
  repoRoot,
  treeBytes,
  typescriptBlocks,
  type WorkspacePackage,
  workspacePackages,
} from "./packaging/workspace.js";

/**
 * A new user's first ten minutes, in CI: every publishable package packed, installed from its
 * tarball into a fresh project outside the workspace (the registry only for third-party
 * dependencies), the README's own snippets compiled by a strict TypeScript consumer and run,
 * and the installed `tessera` binary run. Hoisting inside the workspace hides exactly the
 * failures this catches.
 */

const all = workspacePackages();
const publishable = all.filter((pkg) => pkg.manifest.private !== true);
const privateNames = new Set(
  all.filter((pkg) => pkg.manifest.private === true).map((pkg) => pkg.manifest.name),
);
const rootManifest = JSON.parse(readFileSync(path.join(repoRoot, "package.json"), "utf8")) as {
  devDependencies: Record<string, string>;
};

function run(command: string, args: string[], cwd: string): string {
  return execFileSync(command, args, {
    cwd,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, npm_config_audit: "false", npm_config_fund: "false" },
    maxBuffer: 64 * 1024 * 1024,
  });
}

/** Packs the given packages into `dir`; returns package name → tarball path. */
function pack(packages: readonly WorkspacePackage[], dir: string): Map<string, string> {
  mkdirSync(dir, { recursive: true });
  const args = ["pack", "--json", "--pack-destination", dir];
  for (const pkg of packages) args.push("--workspace", pkg.manifest.name);
  const packed = JSON.parse(run("npm", args, repoRoot)) as { name: string; filename: string }[];
  return new Map(packed.map((entry) => [entry.name, path.join(dir, entry.filename)]));
}

function consumerProject(dir: string, dependencies: Record<string, string>): void {
  mkdirSync(dir, { recursive: true });
  const manifest = {
    name: "tessera-consumer",
    private: true,
    type: "module",
    dependencies,
    allowScripts: { "better-sqlite3": true },
  };
  writeFileSync(path.join(dir, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);
}

/**
 * `npm install` as a user runs it, except that install scripts wait: a package whose script
 * builds a native module the workspace already built (better-sqlite3, from source here: no
 * prebuilt binary can be downloaded) gets the workspace's build when the versions match, and
 * every other package with an install script runs it (`npm rebuild`). Compiling SQLite again
 * took about two minutes of every test run and checked nothing of Tessera's.
 */
function installReusingNativeBuilds(dir: string): void {
  run("npm", ["install", "--ignore-scripts"], dir);
  const rebuild: string[] = [];
  for (const name of packagesWithInstallScripts(path.join(dir, "node_modules"))) {
    if (!reuseWorkspaceBuild(dir, name)) rebuild.push(name);
  }
  if (rebuild.length > 0) run("npm", ["rebuild", ...rebuild], dir);
}

/** Names of installed packages that declare a preinstall, install or postinstall script. */
function packagesWithInstallScripts(modules: string): string[] {
  const names: string[] = [];
  const visit = (folder: string, scope = "") => {
    if (!existsSync(folder)) return;
    for (const entry of readdirSync(folder)) {
      if (entry.startsWith(".")) continue;
      if (entry.startsWith("@") && scope === "") {
        visit(path.join(folder, entry), entry);
        continue;
      }
      const manifest = path.join(folder, entry, "package.json");
      if (!existsSync(manifest)) continue;
      const scripts = (JSON.parse(readFileSync(manifest, "utf8")) as { scripts?: object }).scripts;
      if (scripts && ["preinstall", "install", "postinstall"].some((s) => s in scripts)) {
        names.push(scope === "" ? entry : `${scope}/${entry}`);
      }
    }
  };
  visit(modules);
  return names;
}

/** Copies the workspace's native build of `name` when the same version is installed. */
function reuseWorkspaceBuild(dir: string, name: string): boolean {
  const installed = path.join(dir, "node_modules", name);
  const built = path.join(repoRoot, "node_modules", name);
  const version = (folder: string) =>
    existsSync(path.join(folder, "package.json"))
      ? (JSON.parse(readFileSync(path.join(folder, "package.json"), "utf8")) as { version: string })
          .version
      : undefined;
  if (!existsSync(path.join(built, "build", "Release")) || version(installed) !== version(built)) {
    return false;
  }
  cpSync(path.join(built, "build", "Release"), path.join(installed, "build", "Release"), {
    recursive: true,
    filter: (source) => !/[/\\]obj(\.target)?([/\\]|$)/.test(source),
  });
  return true;
}

describe("packaging: manifests and built imports", () => {
  it("lists the publishable packages", () => {
    expect(publishable.map((pkg) => pkg.manifest.name)).toEqual(
      expect.arrayContaining(["@tessera/core", "@tessera/a2ui", "@tessera/cli"]),
    );
  });

  it("no publishable package depends on a private one or imports an undeclared package", () => {
    expect(publishable.flatMap((pkg) => packagingProblems(pkg, privateNames))).toEqual([]);
  });

  it("the check catches a private dependency and an undeclared import", () => {
    const dir = mkdtempSync(path.join(tmpdir(), "tessera-pack-fixture-"));
    try {
      mkdirSync(path.join(dir, "dist"));
      writeFileSync(
        path.join(dir, "dist", "index.js"),
        [
          'import { z } from "zod";',
          'import "node:fs";',
          '// a comment that reads like one: from "never granted"',
          "export const text = \"import('not-a-package')\";",
          'export const load = () => import("left-pad/x");',
        ].join("\n"),
      );
      const pkg: WorkspacePackage = {
        dir,
        manifest: {
          name: "@tessera/broken",
          version: "0.1.0",
          dependencies: { zod: "^4", "@tessera/example-demo": "0.1.0" },
        },
      };
      expect(packagingProblems(pkg, new Set(["@tessera/example-demo"]))).toEqual([
        "@tessera/broken depends on the private workspace package @tessera/example-demo",
        "@tessera/broken imports left-pad in dist/index.js without declaring it",
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("packaging: installed from the tarballs, outside the workspace", () => {
  let work: string;
  let consumer: string;
  let tarballs: Map<string, string>;

  beforeAll(() => {
    work = mkdtempSync(path.join(tmpdir(), "tessera-packaging-"));
    tarballs = pack(publishable, path.join(work, "tarballs"));
    consumer = path.join(work, "consumer");
    const dependencies: Record<string, string> = {
      typescript: rootManifest.devDependencies.typescript ?? "",
      "@types/node": rootManifest.devDependencies["@types/node"] ?? "",
    };
    for (const [name, file] of tarballs) dependencies[name] = `file:${file}`;
    consumerProject(consumer, dependencies);
    installReusingNativeBuilds(consumer);
  }, 900_000);

  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it("packs every publishable package, without build info or tests", () => {
    expect([...tarballs.keys()].sort()).toEqual(publishable.map((p) => p.manifest.name).sort());
    for (const file of tarballs.values()) {
      const listing = run("tar", ["-tzf", file], work);
      expect(listing, file).not.toMatch(/tsbuildinfo|\.test\.|(^|\/)src\//m);
      expect(listing, file).toMatch(/package\/LICENSE/);
      expect(listing, file).toMatch(/package\/README\.md/);
    }
  });

  it("compiles the READMEs' snippets as a strict NodeNext consumer with skipLibCheck off", () => {
    const sources = path.join(consumer, "src");
    mkdirSync(sources, { recursive: true });
    const readmes = [
      { prefix: "readme", file: path.join(repoRoot, "README.md") },
      ...publishable.map((pkg) => ({
        prefix: path.basename(pkg.dir),
        file: path.join(pkg.dir, "README.md"),
      })),
    ];
    let count = 0;
    for (const { prefix, file } of readmes) {
      typescriptBlocks(readFileSync(file, "utf8")).forEach((block, index) => {
        writeFileSync(path.join(sources, `${prefix}-${index + 1}.ts`), block);
        count += 1;
      });
    }
    expect(count).toBeGreaterThanOrEqual(2);
    const tsconfig = {
      compilerOptions: {
        target: "ES2022",
        lib: ["ES2023", "ESNext.Disposable"],
        module: "NodeNext",
        moduleResolution: "NodeNext",
        strict: true,
        skipLibCheck: false,
        types: ["node"],
        rootDir: "src",
        outDir: "dist",
      },
      include: ["src"],
    };
    writeFileSync(path.join(consumer, "tsconfig.json"), JSON.stringify(tsconfig, null, 2));
    const tsc = path.join(consumer, "node_modules", "typescript", "bin", "tsc");
    let output = "";
    try {
      output = run(process.execPath, [tsc, "-p", "."], consumer);
    } catch (error) {
      output = String((error as { stdout?: string }).stdout ?? error);
    }
    expect(output).toBe("");
  });

  it("runs the README's kernel example with the documented output", () => {
    const lines = run(process.execPath, ["dist/readme-1.js"], consumer).trim().split("\n");
    expect(lines).toEqual([
      "delivered reply from colleague-0",
      "{ status: 'denied', code: 'no_matching_grant' } { status: 'denied', code: 'no_matching_grant' }",
      "spent",
      "never_granted",
    ]);
  });

  it("runs the README's gate example: the first call runs, the retry of its ID runs nothing", () => {
    const lines = run(process.execPath, ["dist/readme-2.js"], consumer).trim().split("\n");
    expect(lines[0]).toBe(
      'dispatched {"version":"v1.0","rendererFunctionResponse":{"functionCallId":"call-1","value":{"total":6}}}',
    );
    expect(lines[1]).toBe("none INVALID_FUNCTION_CALL");
  });

  it("runs the installed tessera binary: demo fanout --json", () => {
    const bin = path.join(consumer, "node_modules", ".bin", "tessera");
    const report = JSON.parse(run(bin, ["demo", "fanout", "--json"], consumer));
    expect(report).toMatchObject({ scenes: expect.any(Array) });
    expect(report.scenes.length).toBe(5);
  });

  it("the installed SQLite backend loads its native module and records a claim", () => {
    const script = [
      'import { openStores } from "@tessera/sqlite";',
      `const stores = await openStores(${JSON.stringify(`sqlite:${path.join(work, "installed.db")}`)});`,
      'const key = { session: "s", functionCallId: "c" };',
      "const first = await stores.claims.claim(key, { bodyHash: 'h', claimedAt: 1 });",
      "const again = await stores.claims.claim(key, { bodyHash: 'h', claimedAt: 2 });",
      "console.log(first.status, again.status);",
      "await stores.close();",
    ].join("\n");
    writeFileSync(path.join(consumer, "sqlite-check.mjs"), script);
    expect(run(process.execPath, ["sqlite-check.mjs"], consumer).trim()).toBe(
      "claimed already_claimed",
    );
  });

  it("@tessera/core and @tessera/a2ui install into an empty project in under 20 MB", () => {
    const small = path.join(work, "core-and-a2ui");
    consumerProject(small, {
      "@tessera/core": `file:${tarballs.get("@tessera/core")}`,
      "@tessera/a2ui": `file:${tarballs.get("@tessera/a2ui")}`,
    });
    installReusingNativeBuilds(small);
    const bytes = treeBytes(path.join(small, "node_modules"));
    console.log(`packaging: core + a2ui node_modules = ${(bytes / 1e6).toFixed(1)} MB`);
    expect(bytes).toBeLessThan(20 * 1024 * 1024);
  }, 300_000);
});
