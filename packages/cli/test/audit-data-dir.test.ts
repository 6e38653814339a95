import { chmodSync, existsSync } from "node:fs";
import { join } from "node:path";
import type { AuditEvent } from "@tessera/core";
import { openStores } from "@tessera/sqlite";
import { beforeAll, describe, expect, it } from "vitest";
import { expectRefusal, scratch, tesseraWith } from "./support/cli.js";

/**
 * The audit commands that read a trail where it is kept (list, explain, verify, checkpoint)
 * take a data directory (`tessera init`) as their source, as `serve --data` does: `--data`, or
 * `TESSERA_DATA` when no source is named. Where `--data` names the service instead (query,
 * tail), it still does.
 */

const run = tesseraWith;

const event = (i: number): AuditEvent => ({
  at: "2026-12-01T00:00:00.000Z",
  source: "kernel",
  outcome: i === 2 ? "denied" : "allowed",
  code: i === 2 ? "tool_unavailable" : null,
  reason: i === 2 ? "grant_exhausted" : "allowed",
  traceId: "t",
  callId: `c${i}`,
  namespaceId: "default",
  actor: "agent",
  authority: "host",
});

let data: string;

beforeAll(async () => {
  data = join(scratch(), "data");
  expect(run({}, "init", data, "--json").code).toBe(0);
  // The file init provisioned, written as serve would write it.
  const stores = await openStores(`sqlite:${join(data, "tessera.db")}?create=false`);
  for (let i = 0; i < 3; i++) await stores.audit.append(event(i));
  await stores.close();
});

describe("audit commands over a data directory", () => {
  it("list --data reads the directory's store", () => {
    const listed = run({}, "audit", "list", "--data", data, "--json");
    expect(listed.code).toBe(0);
    const events = JSON.parse(listed.stdout) as AuditEvent[];
    expect(events.map((e) => e.callId)).toEqual(["c0", "c1", "c2"]);
  });

  it("TESSERA_DATA stands for --data when no source is named: verify, explain", () => {
    const verified = run({ TESSERA_DATA: data }, "audit", "verify");
    expect(verified.code).toBe(0);
    expect(verified.stdout).toContain('stream "default": 3 events, verified to seq 3');
    const explained = run({ TESSERA_DATA: data }, "audit", "explain", "c2", "--json");
    expect(explained.code).toBe(0);
    expect(JSON.parse(explained.stdout)).toMatchObject({ verdict: "spent" });
  });

  it("checkpoint --data signs the directory's heads", () => {
    const keys = scratch();
    expect(run({}, "audit", "keygen", "--out", keys).code).toBe(0);
    const out = join(keys, "checkpoints.json");
    const signed = run(
      {},
      "audit",
      "checkpoint",
      "--data",
      data,
      "--private-key",
      join(keys, "audit-signing.key"),
      "--out",
      out,
    );
    expect(signed.code).toBe(0);
    expect(existsSync(out)).toBe(true);
    const checked = run(
      {},
      "audit",
      "verify",
      "--data",
      data,
      "--checkpoint",
      out,
      "--public-key",
      join(keys, "audit-signing.pub"),
    );
    expect(checked.code).toBe(0);
  });

  it("refuses two sources, and says where a source can come from when none is named", () => {
    expectRefusal(
      run({}, "audit", "list", "--data", data, "--file", join(data, "x.jsonl")),
      "invalid_usage",
    );
    const none = run({}, "audit", "list");
    expectRefusal(none, "invalid_config");
    expect(none.stderr).toContain("--data DIR (or TESSERA_DATA)");
  });

  it("checks the directory as serve does: missing, or open to others", () => {
    expectRefusal(run({}, "audit", "list", "--data", join(data, "nope")), "data_dir_missing");
    chmodSync(data, 0o755);
    try {
      expectRefusal(run({}, "audit", "verify", "--data", data), "data_dir_insecure");
    } finally {
      chmodSync(data, 0o700);
    }
  });

  it("query --data still names the service the directory configures (a token is needed)", () => {
    const asked = run({}, "audit", "query", "--data", data, "--call-id", "c0");
    expectRefusal(asked, "invalid_config");
    expect(asked.stderr).toContain("no bearer token");
  });
});
