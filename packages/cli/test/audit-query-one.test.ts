import { join } from "node:path";
import { type AuditEvent, JsonlAuditSink } from "@tessera/core";
import { openStores } from "@tessera/sqlite";
import { beforeAll, describe, expect, it } from "vitest";
import { expectRefusal, scratch, tesseraWith } from "./support/cli.js";

/**
 * `tessera audit query` reads exactly one call or one trace, from every source alike, as the
 * service's `GET /v1/audit` takes exactly one of `callId` and `traceId`. Before, on a store, a
 * log or a data directory, neither flag printed the whole trail in one unpaged read, and both
 * read their intersection; only a service refused.
 */

const run = tesseraWith;

const event = (i: number): AuditEvent => ({
  at: "2026-12-01T00:00:00.000Z",
  source: "kernel",
  outcome: "allowed",
  code: null,
  reason: "allowed",
  traceId: `t${i % 2}`,
  callId: `c${i}`,
  namespaceId: "default",
  actor: "agent",
  authority: "host",
});

let data: string;
let log: string;
let sources: Record<string, string[]>;

beforeAll(async () => {
  const dir = scratch();
  data = join(dir, "data");
  expect(run({}, "init", data, "--json").code).toBe(0);
  const stores = await openStores(`sqlite:${join(data, "tessera.db")}?create=false`);
  for (let i = 0; i < 4; i++) await stores.audit.append(event(i));
  await stores.close();
  log = join(dir, "audit.jsonl");
  const sink = JsonlAuditSink.open(log);
  for (let i = 0; i < 4; i++) sink.append(event(i));
  sink.close();
  sources = {
    store: ["--store", `sqlite:${join(data, "tessera.db")}`],
    file: ["--file", log],
    data: ["--data", data],
    // Refused before any request: nothing listens on port 1.
    url: ["--url", "http://127.0.0.1:1", "--token", "tsk_x"],
  };
});

describe("tessera audit query: exactly one of --call-id or --trace-id, from every source", () => {
  it("refuses neither flag (the whole trail) with invalid_usage naming both", () => {
    for (const [name, source] of Object.entries(sources)) {
      const refused = run({}, "audit", "query", ...source);
      expectRefusal(refused, "invalid_usage");
      expect(refused.stderr, name).toContain("--call-id");
      expect(refused.stderr, name).toContain("--trace-id");
      expect(refused.stdout, name).toBe("");
    }
    // TESSERA_DATA standing for --data is a source like the others.
    expectRefusal(run({ TESSERA_DATA: data }, "audit", "query"), "invalid_usage");
  });

  it("refuses both flags with invalid_usage, as the service does", () => {
    for (const [name, source] of Object.entries(sources)) {
      const both = ["--call-id", "c1", "--trace-id", "t1"];
      const refused = run({}, "audit", "query", ...source, ...both, "--json");
      expect(refused.code, name).toBe(2);
      expect(JSON.parse(refused.stderr), name).toMatchObject({
        error: { code: "invalid_usage", message: expect.stringContaining("--trace-id") },
      });
    }
  });

  it("reads one call or one trace from a store, a log or a data directory", () => {
    for (const source of [sources.store, sources.file, sources.data]) {
      const byCall = run({}, "audit", "query", ...(source ?? []), "--call-id", "c2", "--json");
      expect(byCall.code, byCall.stderr).toBe(0);
      expect((JSON.parse(byCall.stdout) as AuditEvent[]).map((e) => e.callId)).toEqual(["c2"]);
      const byTrace = run({}, "audit", "query", ...(source ?? []), "--trace-id", "t1", "--json");
      expect(byTrace.code, byTrace.stderr).toBe(0);
      const calls = (JSON.parse(byTrace.stdout) as AuditEvent[]).map((e) => e.callId);
      expect(calls).toEqual(["c1", "c3"]);
    }
  });

  it("says so in its help", () => {
    const help = run({}, "audit", "query", "--help");
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/exactly one call \(--call-id\) or one trace\s+\(--trace-id\)/);
  });
});
