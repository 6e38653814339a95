import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { MCP_JSON_EVENTS } from "../src/commands/mcp.js";
import { tessera } from "./support/cli.js";

/**
 * `tessera mcp --help` names every event `--json` prints. The events are read from the
 * command's own source (each `{ event: "…" }` it says), so a new one the help leaves out
 * fails here. Before, the help named listening, stopping and stopped, not serving (--stdio)
 * or reload_ignored (SIGHUP).
 */

const SOURCE = readFileSync(new URL("../src/commands/mcp.ts", import.meta.url), "utf8");

/** Every event name the command's code prints: `{ event: "name", … }`. */
const emitted = [...new Set([...SOURCE.matchAll(/\{\s*event:\s*"(\w+)"/g)].map((m) => m[1]))];

describe("tessera mcp --help", () => {
  it("names each event --json prints", () => {
    expect(emitted.length).toBeGreaterThan(0);
    const help = tessera("mcp", "--help");
    expect(help.code).toBe(0);
    // Commander wraps the help: read it as one line.
    const text = help.stdout.replace(/\s+/g, " ");
    const json = /--json (.*?) -h, --help/.exec(text)?.[1] ?? "";
    for (const event of emitted) expect(json, event).toMatch(new RegExp(`\\b${event}\\b`));
  });

  it("takes its events from the one list the code prints from", () => {
    expect([...MCP_JSON_EVENTS].sort()).toEqual([...emitted].sort());
  });
});
