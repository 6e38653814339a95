import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { McpError } from "@modelcontextprotocol/sdk/types.js";
import { openStores, type StoreBundle } from "@tessera/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLI, stdioClient, writeConfig } from "./processes.js";
import { ALICE_TOKEN, DAVE_TOKEN, readCounts, textOf, toolGrant } from "./support.js";

const KEY = "io.tessera/idempotency-key";
let dir: string;
let stores: StoreBundle;
let countFile: string;
let config: string;
const clients: Client[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "tessera-mcp-stdio-"));
  countFile = join(dir, "count.jsonl");
  const url = `sqlite:${join(dir, "t.db")}`;
  stores = await openStores(url);
  for (const grant of [
    toolGrant("alice", ["messages", "send_message", "bob"], { maxUses: 1 }),
    toolGrant("alice", ["messages", "slow"]),
    toolGrant("dave", ["messages", "slow"]),
  ]) {
    await stores.grants.add(grant);
  }
  config = writeConfig(dir, url, countFile);
});

afterAll(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await stores?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function connect(token: string): Promise<Client> {
  const client = await stdioClient(config, token);
  clients.push(client);
  return client;
}

describe("tessera mcp --stdio with the official SDK client", () => {
  it("lists, runs a single-use ticket once, answers replays from the record (sequential and 25 racing)", async () => {
    const alice = await connect(ALICE_TOKEN);
    expect((await alice.listTools()).tools.map((t) => t.name).sort()).toEqual([
      "messages.send_message",
      "messages.slow",
    ]);
    const send = {
      name: "messages.send_message",
      arguments: { to: "bob", text: "hi" },
      _meta: { [KEY]: "s-1" },
    };
    const first = await alice.callTool(send);
    expect(textOf(first)).toBe("sent to bob: hi");
    expect(await alice.callTool(send)).toEqual(first);
    expect(readCounts(countFile, "send_message")).toBe(1);
    // Spent: gone from the list, and a fresh call is refused like a tool never granted.
    expect((await alice.listTools()).tools.map((t) => t.name)).toEqual(["messages.slow"]);
    const fresh = await alice.callTool({
      name: "messages.send_message",
      arguments: { to: "bob", text: "again" },
    });
    expect(textOf(fresh)).toBe("tool_unavailable");

    const racing = await Promise.allSettled(
      Array.from({ length: 25 }, () =>
        alice.callTool({ name: "messages.slow", arguments: { ms: 200 }, _meta: { [KEY]: "race" } }),
      ),
    );
    expect(readCounts(countFile, "slow")).toBe(1);
    for (const r of racing) {
      if (r.status === "fulfilled") expect(textOf(r.value)).toBe("slept 200");
      else expect((r.reason as McpError).data).toEqual({ code: "call_in_progress" });
    }
  });

  it("a second principal in its own gateway process is unaffected by the first's key", async () => {
    const dave = await connect(DAVE_TOKEN);
    const result = await dave.callTool({
      name: "messages.slow",
      arguments: { ms: 200 },
      _meta: { [KEY]: "race" },
    });
    expect(textOf(result)).toBe("slept 200");
    expect(readCounts(countFile, "slow")).toBe(2);
  });

  it("refuses to start without a token", async () => {
    await expect(stdioClient(config, "")).rejects.toThrow();
  });

  it("answers a line it cannot read with a JSON-RPC error (id null), and goes on serving", async () => {
    const child = spawn(process.execPath, [CLI, "mcp", "--config", config, "--stdio"], {
      env: { ...process.env, TESSERA_MCP_TOKEN: ALICE_TOKEN },
      stdio: ["pipe", "pipe", "ignore"],
    });
    const answers: { id?: unknown; error?: { code: number }; result?: unknown }[] = [];
    let buffered = "";
    const listed = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("no answer to tools/list")), 30_000);
      child.stdout.on("data", (chunk: Buffer) => {
        buffered += chunk.toString("utf8");
        const lines = buffered.split("\n");
        buffered = lines.pop() ?? "";
        for (const line of lines) answers.push(JSON.parse(line));
        if (answers.some((a) => a.id === 1)) {
          clearTimeout(timer);
          resolve();
        }
      });
    });
    const lines = [
      JSON.stringify({
        jsonrpc: "2.0",
        id: 0,
        method: "initialize",
        params: {
          protocolVersion: "2025-06-18",
          capabilities: {},
          clientInfo: { name: "raw", version: "1" },
        },
      }),
      JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }),
      "{not json",
      "[]",
      "null",
      JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    ];
    child.stdin.write(`${lines.join("\n")}\n`);
    try {
      await listed;
    } finally {
      child.stdin.end();
      child.kill();
    }
    const unreadable = answers.filter((a) => a.id === null).map((a) => a.error?.code);
    expect(unreadable).toEqual([-32700, -32600, -32600]);
    expect(answers.find((a) => a.id === 1)?.result).toBeDefined();
  });

  it("refuses a token no principal holds as unauthenticated (exit 2), not as a config problem", () => {
    const run = spawnSync(process.execPath, [CLI, "mcp", "--config", config, "--stdio"], {
      encoding: "utf8",
      timeout: 60_000,
      input: "",
      env: { ...process.env, TESSERA_MCP_TOKEN: "not-a-principals-token" },
    });
    expect(run.status).toBe(2);
    expect(run.stdout).toBe("");
    expect(run.stderr).toContain("unauthenticated: the token names no principal of this gateway");
    expect(run.stderr).not.toContain("invalid_config");
    expect(run.stderr).not.toContain("not-a-principals-token");
  });
});
