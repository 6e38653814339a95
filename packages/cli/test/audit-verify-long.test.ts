import { spawnSync } from "node:child_process";
import { closeSync, openSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { AuditEvent } from "@tessera/core";
import { auditStreamOf, type ChainHead, EMPTY_HEAD, linkAuditEvent } from "@tessera/core/store-kit";
import { describe, expect, it } from "vitest";
import { BIN, scratch, tesseraWith } from "./support/cli.js";

/**
 * `tessera audit verify` and `audit list` go through a trail a page at a time: a trail far
 * larger than the heap they are given still verifies and lists, and a break near its end is
 * still found. Read whole (as before), these 120,000 events take about 200 MB of heap; the
 * walk is given 32 MB.
 */

const EVENTS = 120_000;
const HEAP_MB = 32;

function longLog(edit?: number): string {
  const heads = new Map<string, ChainHead>();
  const lines: string[] = [];
  for (let i = 0; i < EVENTS; i++) {
    const event: AuditEvent = {
      at: "2026-12-04T00:00:00.000Z",
      source: "kernel",
      outcome: "allowed",
      code: null,
      reason: "allowed",
      traceId: `trace-${i}`,
      callId: `call-${i}`,
      actor: `agent-${i % 7}`,
      namespaceId: `ns-${i % 3}`,
      detail: "an event of ordinary size, with a sentence of detail in it",
    };
    const stream = auditStreamOf(event);
    const linked = linkAuditEvent(event, heads.get(stream) ?? EMPTY_HEAD);
    heads.set(stream, { seq: linked.seq, hash: linked.hash });
    lines.push(JSON.stringify(i === edit ? { ...linked, callId: "rewritten" } : linked));
  }
  const file = join(scratch(), "audit.jsonl");
  writeFileSync(file, `${lines.join("\n")}\n`);
  return file;
}

const verifyWithSmallHeap = (file: string) =>
  tesseraWith(
    { NODE_OPTIONS: `--max-old-space-size=${HEAP_MB}` },
    "audit",
    "verify",
    "--file",
    file,
    "--json",
  );

describe("tessera audit verify on a trail larger than its heap", () => {
  it("verifies 120,000 events in 32 MB of heap", () => {
    const run = verifyWithSmallHeap(longLog());
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const report = JSON.parse(run.stdout) as {
      intact: boolean;
      events: number;
      streams: unknown[];
    };
    expect(report).toMatchObject({ intact: true, events: EVENTS });
    expect(report.streams).toHaveLength(3);
  }, 120_000);

  it("finds an edit near the end of it, at its position in the whole trail", () => {
    const at = EVENTS - 10;
    const run = verifyWithSmallHeap(longLog(at));
    expect(run.code).toBe(3);
    expect(JSON.parse(run.stdout)).toMatchObject({
      intact: false,
      break: { kind: "edited", index: at, stream: `ns-${at % 3}` },
    });
  }, 120_000);

  it("lists all 120,000 events in 32 MB of heap, one line each, in order", () => {
    const log = longLog();
    const out = join(scratch(), "listing.txt");
    const fd = openSync(out, "w");
    try {
      const run = spawnSync(process.execPath, [BIN, "audit", "list", "--file", log], {
        stdio: ["ignore", fd, "pipe"],
        env: { ...process.env, NODE_OPTIONS: `--max-old-space-size=${HEAP_MB}` },
        encoding: "utf8",
        timeout: 120_000,
      });
      expect(run.stderr).toBe("");
      expect(run.status).toBe(0);
    } finally {
      closeSync(fd);
    }
    const lines = readFileSync(out, "utf8").trimEnd().split("\n");
    expect(lines).toHaveLength(EVENTS);
    expect(lines[0]).toContain("call-0");
    expect(lines[EVENTS - 1]).toContain(`call-${EVENTS - 1}`);
  }, 120_000);
});
