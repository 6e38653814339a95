import { chmodSync, existsSync } from "node:fs";
import { join } from "node:path";
import type { AuditEvent } from "@tessera/core";
import { openStores } from "@tessera/sqlite";
import { beforeAll, describe, expect, it } from "vitest";
import { claimDirWithOneInDoubt, expectRefusal, scratch, tesseraWith } from "./support/cli.js";

/**
 * The audit commands that read a trail where it is kept (list, explain, verify, checkpoint)
 * take a data directory (`tessera init`) as their source, as `serve --data` does: `--data`, or
 * `TESSERA_DATA` when no source is named. The commands that read a service or a store (query,
 * tail, the top-level explain) read the directory's store too while no token names a service,
 * and its service once one does.
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

  it("query, tail and explain --data read the store while no token names a service", () => {
    const asked = run({}, "audit", "query", "--data", data, "--call-id", "c0", "--json");
    expect(asked.code).toBe(0);
    expect((JSON.parse(asked.stdout) as AuditEvent[]).map((e) => e.callId)).toEqual(["c0"]);
    const tailed = run({ TESSERA_DATA: data }, "audit", "tail", "-n", "2", "--json");
    expect(tailed.code).toBe(0);
    const lines = tailed.stdout.trim().split("\n");
    expect(lines.map((line) => (JSON.parse(line) as AuditEvent).callId)).toEqual(["c1", "c2"]);
    const explained = run({}, "explain", "c2", "--data", data, "--json");
    expect(explained.code).toBe(0);
    expect(JSON.parse(explained.stdout)).toMatchObject({ verdict: "spent" });
    // A principal's flags go with the directory's store as with any store.
    const foreign = run(
      {},
      ...["explain", "c2", "--data", data, "--namespace", "other", "--actor", "a"],
      ...["--authority", "host", "--json"],
    );
    expect(JSON.parse(foreign.stdout)).toMatchObject({ verdict: "unknown" });
  });

  it("with a token, --data names the directory's service (none listens here: unreachable)", () => {
    const asked = run(
      { TESSERA_TOKEN: "tsk_x" },
      "audit",
      "query",
      "--data",
      data,
      "--call-id",
      "c0",
    );
    expectRefusal(asked, "service_unreachable");
    const explained = run({}, "explain", "c2", "--data", data, "--token", "tsk_x");
    expectRefusal(explained, "service_unreachable");
  });

  it("claims --in-doubt --data lists the directory's claims while no token names a service", async () => {
    // serve keeps every claim of a data directory in its private claim directory.
    await claimDirWithOneInDoubt(join(data, "claims"));
    const listed = run({}, "claims", "--in-doubt", "--data", data, "--json");
    expect(listed.code).toBe(0);
    const claims = JSON.parse(listed.stdout) as { functionCallId: string }[];
    expect(claims.map((claim) => claim.functionCallId)).toEqual(["died-here"]);
    const bySession = run({ TESSERA_DATA: data }, "claims", "--in-doubt", "--session", "s-2");
    expect(bySession.code).toBe(0);
    expect(bySession.stdout).toContain("0 claim(s) in doubt");
    expectRefusal(
      run({}, "claims", "--in-doubt", "--data", data, "--dir", join(data, "claims")),
      "invalid_usage",
    );
    const remote = run({ TESSERA_TOKEN: "tsk_x" }, "claims", "--in-doubt", "--data", data);
    expectRefusal(remote, "service_unreachable");
  });

  it("a named store outranks TESSERA_DATA; --data beside --store is two sources", () => {
    const other = join(scratch(), "other.jsonl");
    const none = run({ TESSERA_DATA: data }, "audit", "query", "--file", other, "--call-id", "c0");
    expectRefusal(none, "file_not_found");
    const both = run(
      {},
      "audit",
      "tail",
      "--data",
      data,
      "--store",
      `sqlite:${join(data, "tessera.db")}`,
    );
    expectRefusal(both, "invalid_usage");
  });
});
