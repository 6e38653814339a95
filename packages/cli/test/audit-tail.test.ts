import { spawn } from "node:child_process";
import { join } from "node:path";
import type { AuditEvent } from "@tessera/core";
import { openStores } from "@tessera/sqlite";
import { describe, expect, it } from "vitest";
import { BIN, scratch, tessera } from "./support/cli.js";

/**
 * `audit tail` reads a store from its newest end: `-n` shows the last events without reading the
 * whole trail, and `--follow` reads only what is new each interval, however long the trail.
 * Before, both read every event each time (1.0 s for `tail -n 3` of 200,000 events).
 */
const event = (i: number): AuditEvent => ({
  at: "2026-11-30T00:00:00.000Z",
  source: "kernel",
  outcome: "denied",
  code: "tool_unavailable",
  reason: "grant_exhausted",
  traceId: `t${i % 7}`,
  callId: `c${i}`,
  namespaceId: "team",
});

async function append(path: string, from: number, count: number): Promise<void> {
  const stores = await openStores(`sqlite:${path}`);
  try {
    const events = Array.from({ length: count }, (_, i) => event(from + i));
    await Promise.all(events.map((e) => stores.audit.append(e)));
  } finally {
    await stores.close();
  }
}

const until = async (done: () => boolean, ms: number) => {
  for (const end = Date.now() + ms; !done() && Date.now() < end; ) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
};

describe("audit tail on a long trail", () => {
  it("-n shows the newest events, oldest first, with and without a filter", async () => {
    const path = join(scratch(), "tessera.db");
    await append(path, 0, 3_000);
    const store = `sqlite:${path}`;
    const last = tessera("audit", "tail", "-n", "3", "--store", store, "--json");
    expect(last.code).toBe(0);
    const ids = (out: string) =>
      out
        .trim()
        .split("\n")
        .map((line) => (JSON.parse(line) as AuditEvent).callId);
    expect(ids(last.stdout)).toEqual(["c2997", "c2998", "c2999"]);
    const traced = tessera(
      "audit",
      "tail",
      "-n",
      "2",
      "--trace-id",
      "t0",
      "--store",
      store,
      "--json",
    );
    expect(ids(traced.stdout)).toEqual(["c2989", "c2996"]);
  });

  it("--follow prints every new event once, in order, even more than one read's window", async () => {
    const path = join(scratch(), "tessera.db");
    await append(path, 0, 3_000);
    const child = spawn(process.execPath, [
      BIN,
      ...["audit", "tail", "--store", `sqlite:${path}`, "-n", "1", "--follow"],
      ...["--interval", "100", "--json"],
    ]);
    let out = "";
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString();
    });
    try {
      await until(() => out.includes('"c2999"'), 20_000);
      await append(path, 3_000, 5);
      await until(() => out.includes('"c3004"'), 10_000);
      // More than the first window (1,000) arrives between two reads: the window grows.
      await append(path, 3_005, 2_500);
      await until(() => out.includes('"c5504"'), 20_000);
    } finally {
      const exited = new Promise<number | null>((resolve) => child.once("close", resolve));
      child.kill("SIGINT");
      expect(await exited).toBe(0);
    }
    const followed = out
      .trim()
      .split("\n")
      .map((line) => (JSON.parse(line) as AuditEvent).callId);
    expect(followed).toEqual([
      "c2999",
      ...Array.from({ length: 2_505 }, (_, i) => `c${3_000 + i}`),
    ]);
  }, 60_000);
});
