import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { COMMANDS } from "../src/commands/index.js";
import { buildProgram } from "../src/full-program.js";
import { BIN, tessera } from "./support/cli.js";

/** The modules of this repository and of node_modules that `tessera ARGS` loads, in order. */
function loadedBy(...args: string[]): string[] {
  const dir = mkdtempSync(join(tmpdir(), "tessera-startup-"));
  const hook = join(dir, "hook.mjs");
  writeFileSync(
    hook,
    // Hooks run on a thread of their own, whose process.stderr is piped through the main
    // thread and may be cut off when a quick command exits: written to fd 2 at once instead.
    `import { writeSync } from "node:fs";
export async function resolve(specifier, context, next) {
  const found = await next(specifier, context);
  if (found.url.startsWith("file:")) writeSync(2, "loaded " + found.url + "\\n");
  return found;
}\n`,
  );
  const register = `import{register}from"node:module";register(${JSON.stringify(pathToFileURL(hook).href)})`;
  const run = spawnSync(
    process.execPath,
    ["--import", `data:text/javascript,${register}`, BIN, ...args],
    { encoding: "utf8", timeout: 60_000 },
  );
  expect(run.status).toBe(0);
  return [...run.stderr.matchAll(/^loaded file:\/\/(.*)$/gm)].map((m) => m[1] as string);
}

describe("tessera starts with only what the command line needs", () => {
  it("prints --version without loading any command, store, schema or package of ours", () => {
    const loaded = loadedBy("--version");
    const ours = loaded.filter((path) => !path.includes("/node_modules/commander/"));
    expect(ours.map((path) => path.replace(/^.*\/packages\/cli\/dist\//, ""))).toEqual(
      expect.arrayContaining(["bin.js", "program.js", "commands/index.js", "output.js"]),
    );
    expect(ours.every((path) => path.includes("/packages/cli/dist/"))).toBe(true);
    expect(ours.some((path) => path.includes("/commands/serve.js"))).toBe(false);
  });

  it("loads the command it runs, and only that one", () => {
    const loaded = loadedBy("init", "--help");
    expect(loaded.some((path) => path.endsWith("/commands/init.js"))).toBe(true);
    expect(loaded.some((path) => path.endsWith("/commands/serve.js"))).toBe(false);
    expect(loaded.some((path) => path.endsWith("/commands/mcp.js"))).toBe(false);
  });

  it("lists every command in --help, each summary the command's own description", () => {
    const full = buildProgram();
    expect(COMMANDS.map((entry) => [entry.name, entry.summary])).toEqual(
      full.commands.map((command) => [command.name(), command.description()]),
    );
    const help = tessera("--help");
    expect(help.code).toBe(0);
    for (const entry of COMMANDS) expect(help.stdout).toMatch(new RegExp(`^  ${entry.name} `, "m"));
  });

  it("still lists a command's every option in its own --help (tessera X --help, tessera help X)", () => {
    const serve = buildProgram().commands.find((command) => command.name() === "serve");
    const flags = serve?.options.map((option) => option.long) ?? [];
    expect(flags.length).toBeGreaterThan(5);
    for (const help of [tessera("serve", "--help"), tessera("help", "serve")]) {
      expect(help.code).toBe(0);
      for (const flag of flags) expect(help.stdout).toContain(flag);
    }
  });
});
