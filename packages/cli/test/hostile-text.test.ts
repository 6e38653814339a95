import { join } from "node:path";
import type { AuditEvent } from "@tessera/core";
import { openStores } from "@tessera/sqlite";
import { describe, expect, it } from "vitest";
import { scratch, tessera } from "./support/cli.js";

/**
 * An agent names its own call IDs, and they reach the audit trail as written. Read by an
 * operator in a terminal, such an ID must not forge a line (`\r\n`), run a terminal command
 * (an escape sequence: colour, window title, a C1 CSI) or read backwards (a bidi override).
 * Text output shows each such character as `\uXXXX`; `--json` keeps the ID exact.
 */
const HOSTILE =
  "evil\u001b[31mRED\u001b]0;pwned\u0007\r\n2026-11-30T00:00:00.000Z allowed FAKE\u009b2J\u202etxt.exe\u2028";
// What a line of text output may not hold: every control but the newline that ends a line.
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
const UNPRINTABLE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e]/;

const event = (callId: string): AuditEvent => ({
  at: "2026-11-30T00:00:00.000Z",
  source: "kernel",
  outcome: "denied",
  code: "tool_unavailable",
  reason: "grant_exhausted",
  traceId: "t",
  callId,
  namespaceId: "team",
  actor: "agent",
  authority: "host",
  action: "tool.call",
  resource: "tools:/search",
});

async function trail(): Promise<string> {
  const path = join(scratch(), "tessera.db");
  const stores = await openStores(`sqlite:${path}`);
  await stores.audit.append(event(HOSTILE));
  await stores.audit.append(event("plain"));
  await stores.close();
  return `sqlite:${path}`;
}

describe("audit text output with hostile call IDs", () => {
  it("list, tail and query print one line per event, controls escaped", async () => {
    const store = await trail();
    const runs = [
      tessera("audit", "list", "--store", store),
      tessera("audit", "tail", "--store", store),
      tessera("audit", "query", "--store", store, "--call-id", HOSTILE),
    ];
    for (const [i, run] of runs.entries()) {
      expect([i, run.code, run.stderr]).toEqual([i, 0, ""]);
      expect(run.stdout).not.toMatch(UNPRINTABLE);
      expect(run.stdout).toContain("evil\\u001b[31mRED\\u001b]0;pwned\\u0007\\u000d\\u000a2026");
      expect(run.stdout).toContain("\\u009b2J\\u202etxt.exe\\u2028");
    }
    const [list, tail, query] = runs.map((run) => run.stdout.trimEnd().split("\n"));
    expect([list?.length, tail?.length, query?.length]).toEqual([2, 2, 1]);
    expect(list?.[1]).toContain("plain");
  });

  it("--json keeps the ID exact (JSON's own escapes), for a script that needs the bytes", async () => {
    const store = await trail();
    const json = tessera("audit", "list", "--store", store, "--json");
    expect(json.code).toBe(0);
    expect(json.stdout).not.toMatch(UNPRINTABLE);
    expect((JSON.parse(json.stdout) as AuditEvent[]).map((e) => e.callId)).toEqual([
      HOSTILE,
      "plain",
    ]);
    const lines = tessera("audit", "tail", "--store", store, "--json");
    expect(lines.stdout).not.toMatch(UNPRINTABLE);
    const events = lines.stdout
      .trimEnd()
      .split("\n")
      .map((line) => JSON.parse(line) as AuditEvent);
    expect(events.map((e) => e.callId)).toEqual([HOSTILE, "plain"]);
  });
});
