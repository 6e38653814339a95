import { readFileSync } from "node:fs";
import type { Command } from "commander";
import { describe, expect, it } from "vitest";
import { buildProgram } from "../src/full-program.js";

const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");

/** Every command a user can run, as typed: `demo fanout`, `grants add`, `serve`, … */
function leaves(command: Command, prefix: string[] = []): string[] {
  return command.commands
    .filter((sub) => sub.name() !== "help")
    .flatMap((sub) =>
      sub.commands.length === 0
        ? [[...prefix, sub.name()].join(" ")]
        : leaves(sub, [...prefix, sub.name()]),
    );
}

/** Lines of the README's ```sh blocks. */
const shellLines = [...readme.matchAll(/```sh\n([\s\S]*?)```/g)].flatMap((match) =>
  (match[1] ?? "").split("\n").map((line) => line.replace(/^\$ /, "")),
);

describe("the CLI README", () => {
  it.each(leaves(buildProgram()))("shows `tessera %s` with an example", (path) => {
    expect(shellLines.some((line) => line.startsWith(`tessera ${path} `))).toBe(true);
  });

  it("states the error shape and every exit code the CLI uses", () => {
    expect(readme).toContain("tessera: <code>: <message>");
    for (const exit of [0, 1, 2, 3]) expect(readme).toMatch(new RegExp(`^\\| ${exit} `, "m"));
  });
});
