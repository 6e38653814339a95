import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { explain, InMemoryGrantUsageStore } from "@tessera/core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ALICE_TOKEN, type Harness, readCounts, startHarness, toolGrant } from "./support.js";

/**
 * A single-use ticket and an upstream that is down: a call refused at connect (nothing was
 * written) answers upstream_failed and gives the use back, audited `use_returned`; once the
 * upstream is back, the same ticket runs the tool once. A call that reached the upstream
 * keeps its use spent.
 */
const RAW = fileURLToPath(new URL("./fixtures/raw-upstream.mjs", import.meta.url));
const KEY = "io.tessera/idempotency-key";
let dir: string;
let countFile: string;
let harness: Harness | undefined;
const children: ChildProcess[] = [];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "tessera-mcp-unsent-"));
  countFile = join(dir, "count.jsonl");
});
afterEach(async () => {
  await harness?.close();
  harness = undefined;
  for (const child of children.splice(0)) child.kill("SIGKILL");
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function rpcCode(error: unknown): string | undefined {
  return (error as { data?: { code?: string } }).data?.code;
}

/** The raw HTTP upstream in a process of its own, on `port` (0: any free one). */
function startRawHttp(port = 0): Promise<{ url: string; port: number; kill(): Promise<void> }> {
  const child = spawn(process.execPath, [RAW, "--http", String(port)], {
    env: { COUNT_FILE: countFile, PATH: process.env.PATH ?? "" },
    stdio: ["ignore", "pipe", "inherit"],
  });
  children.push(child);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      if (!out.includes("\n")) return;
      const { url } = JSON.parse(out.split("\n")[0] as string) as { url: string };
      resolve({
        url,
        port: Number(new URL(url).port),
        kill: async () => {
          child.kill("SIGKILL");
          await exited;
        },
      });
    });
    child.once("exit", (code) => reject(new Error(`raw upstream exited ${code}`)));
  });
}

describe("a single-use ticket and an upstream that is down", () => {
  it("connection refused: upstream_failed, the use given back (use_returned); the ticket runs the tool once the upstream is back", async () => {
    const upstream = await startRawHttp();
    const usage = new InMemoryGrantUsageStore();
    const grant = toolGrant("alice", ["raw", "echo"], { maxUses: 1 });
    harness = await startHarness(
      {
        upstreams: { raw: { url: upstream.url } },
        tools: {},
        usage,
        limits: { restartBackoffMs: 10 },
      },
      [grant],
    );
    const alice = await harness.client(ALICE_TOKEN);
    await upstream.kill();

    const down = { name: "raw.echo", arguments: { text: "hi" }, _meta: { [KEY]: "down-1" } };
    await expect(alice.callTool(down)).rejects.toSatisfy((e) => rpcCode(e) === "upstream_failed");
    expect(await usage.getUsage("acme", grant.id)).toBe(0);
    const events = await harness.audit.read({ callId: "down-1" });
    // The act's event (recorded before forwarding), the upstream's outcome, the use given back.
    expect(events.map((e) => [e.reason, e.receipt])).toEqual([
      ["allowed", undefined],
      ["delivery_failed", "failed"],
      ["use_returned", "failed"],
    ]);
    expect(events[1]?.detail).toMatch(/nothing was sent/);
    expect((await explain(harness.audit, "down-1")).verdict).toBe("use_returned");
    // The replay of that key answers what it answered; it is not forwarded again.
    await expect(alice.callTool(down)).rejects.toSatisfy((e) => rpcCode(e) === "upstream_failed");

    // Back on the same port: the same single-use ticket runs the tool, once.
    const again = await startRawHttp(upstream.port);
    let ran = false;
    for (let i = 0; i < 40 && !ran; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      try {
        await alice.callTool({
          name: "raw.echo",
          arguments: { text: "hi" },
          _meta: { [KEY]: `up-${i}` },
        });
        ran = true;
      } catch (error) {
        if (rpcCode(error) !== "upstream_failed") throw error;
      }
    }
    expect(ran).toBe(true);
    expect(readCounts(countFile, "echo")).toBe(1);
    expect(await usage.getUsage("acme", grant.id)).toBe(1);
    // Spent now: the next call is refused, and nothing runs.
    const spent = await alice.callTool({
      name: "raw.echo",
      arguments: { text: "hi" },
      _meta: { [KEY]: "after" },
    });
    expect(spent.isError).toBe(true);
    expect(readCounts(countFile, "echo")).toBe(1);
    await again.kill();
  });

  it("a call the upstream received and failed keeps its use spent", async () => {
    const upstream = await startRawHttp();
    const usage = new InMemoryGrantUsageStore();
    const grant = toolGrant("alice", ["raw", "rpc_error"], { maxUses: 1 });
    harness = await startHarness({ upstreams: { raw: { url: upstream.url } }, tools: {}, usage }, [
      grant,
    ]);
    const alice = await harness.client(ALICE_TOKEN);
    const call = { name: "raw.rpc_error", arguments: { code: -32000 }, _meta: { [KEY]: "sent-1" } };
    await expect(alice.callTool(call)).rejects.toSatisfy((e) => rpcCode(e) === "upstream_failed");
    expect(await usage.getUsage("acme", grant.id)).toBe(1);
    const events = await harness.audit.read({ callId: "sent-1" });
    expect(events.map((e) => e.reason)).toEqual(["allowed", "delivery_failed"]);
    await upstream.kill();
  });
});
