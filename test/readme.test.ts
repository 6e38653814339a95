import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = new URL("../", import.meta.url);
const readme = readFileSync(new URL("README.md", root), "utf8");

/** The first ```ts block under a README heading, so the docs cannot drift from the code. */
function exampleUnder(heading: string): string {
  const section = readme.slice(readme.indexOf(`## ${heading}`));
  const match = /```ts\n([\s\S]*?)```/.exec(section);
  if (!match?.[1]) throw new Error(`README has no example under "${heading}"`);
  return match[1];
}

/** Runs an example as a module inside the repository, so `@tessera/*` resolve as for a user. */
function run(name: string, source: string): string[] {
  const dir = new URL(".tmp/", root);
  mkdirSync(dir, { recursive: true });
  const file = new URL(`readme-${name}.mjs`, dir);
  writeFileSync(file, source);
  return execFileSync(process.execPath, [fileURLToPath(file)], { encoding: "utf8" })
    .trim()
    .split("\n");
}

describe("README examples run as written", () => {
  it("kernel: a spent ticket and a stranger look alike to the caller; audit tells them apart", () => {
    expect(run("kernel", exampleUnder("Using the kernel"))).toEqual([
      "delivered reply from colleague-0",
      "{ status: 'denied', code: 'no_matching_grant' } { status: 'denied', code: 'no_matching_grant' }",
      "spent",
      "never_granted",
    ]);
  });

  it("gate: the first call runs, the retry of its ID runs nothing", () => {
    const lines = run("gate", exampleUnder("Using the A2UI gate"));
    expect(lines[0]).toBe(
      'dispatched {"version":"v1.0","rendererFunctionResponse":{"functionCallId":"call-1","value":{"total":6}}}',
    );
    expect(lines[1]).toBe("none INVALID_FUNCTION_CALL");
  });
});
