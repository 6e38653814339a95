import { spawn } from "node:child_process";
import { once } from "node:events";
import { join } from "node:path";
import { type AuditEvent, JsonlAuditSink } from "@tessera/core";
import { describe, expect, it } from "vitest";
import { BIN, scratch, tessera } from "./support/cli.js";

/**
 * `tessera audit list` of a whole trail prints it a page of 1,000 at a time: what it prints is
 * what reading the trail whole printed, the JSON byte for byte.
 */

const EVENTS = 2_500;

function trail(): string {
  const file = join(scratch(), "audit.jsonl");
  const sink = JsonlAuditSink.open(file);
  for (let i = 0; i < EVENTS; i++) {
    sink.append({
      at: "2026-12-04T00:00:00.000Z",
      source: "kernel",
      outcome: i % 2 === 0 ? "allowed" : "denied",
      code: i % 2 === 0 ? null : "no_matching_grant",
      reason: i % 2 === 0 ? "allowed" : "no_capability",
      traceId: `trace-${i}`,
      // A bidi mark and a C1 control in one ID: escaped in JSON as the whole read escaped them.
      callId: i === 1_500 ? "call-\u202e\u009b" : `call-${i}`,
      namespaceId: `ns-${i % 3}`,
    });
  }
  sink.close();
  return file;
}

describe("tessera audit list, a page at a time", () => {
  it("prints every event across pages, and --json exactly as one array", async () => {
    const file = trail();
    const events = await JsonlAuditSink.open(file).read();
    const whole = JSON.stringify(events, null, 2)
      .replaceAll("\u202e", "\\u202e")
      .replaceAll("\u009b", "\\u009b");
    const json = tessera("audit", "list", "--file", file, "--json");
    expect(json.code).toBe(0);
    expect(json.stdout).toBe(`${whole}\n`);
    expect(JSON.parse(json.stdout)).toEqual(events);

    const text = tessera("audit", "list", "--file", file);
    const lines = text.stdout.trimEnd().split("\n");
    expect(lines).toHaveLength(EVENTS);
    expect(lines[1_500]).toContain("call-\\u202e\\u009b");
  });

  it("--limit stops inside a page or at its edge", () => {
    const file = trail();
    for (const limit of [1, 999, 1_000, 1_001, 2_500, 9_999]) {
      const run = tessera("audit", "list", "--file", file, "--limit", String(limit), "--json");
      const listed = JSON.parse(run.stdout) as AuditEvent[];
      expect(listed).toHaveLength(Math.min(limit, EVENTS));
      expect(listed.at(-1)?.callId).toBe(`call-${Math.min(limit, EVENTS) - 1}`);
    }
  });

  it("an empty trail prints [] with --json, and says so on stderr without", () => {
    const file = join(scratch(), "empty.jsonl");
    JsonlAuditSink.open(file).close();
    expect(tessera("audit", "list", "--file", file, "--json").stdout).toBe("[]\n");
    const text = tessera("audit", "list", "--file", file);
    expect(text.stdout).toBe("");
    expect(text.stderr).not.toBe("");
  });

  it("ends quietly, exit 0, when its reader stops reading (| head)", async () => {
    const child = spawn(process.execPath, [BIN, "audit", "list", "--file", trail()]);
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    // Read the first chunk, then go away as `head` does: the rest meets a closed pipe.
    await once(child.stdout, "data");
    child.stdout.destroy();
    const [code, signal] = (await once(child, "exit")) as [number | null, string | null];
    expect(stderr).toBe("");
    expect({ code, signal }).toEqual({ code: 0, signal: null });
  });
});
