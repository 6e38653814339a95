import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { openStores } from "@tessera/core";
import { afterAll, describe, expect, it } from "vitest";
import { CLI } from "./processes.js";
import { ALICE_TOKEN, PRINCIPALS, toolGrant, UPSTREAM } from "./support.js";

/** `tessera mcp --stdio` writes one JSON line per tool call on stderr (stdout is the protocol). */
const SECRET_TEXT = "CALL-LOG-SECRET-ARGUMENT";
const clients: Client[] = [];
afterAll(async () => {
  await Promise.allSettled(clients.map((client) => client.close()));
});

describe("tessera mcp's per-call log", () => {
  it("writes a decision line per call, allowed and denied, never arguments or token", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tessera-mcp-log-"));
    const store = join(dir, "mcp.db");
    const stores = await openStores(`sqlite:${store}?create=true`);
    await stores.grants.add(toolGrant("alice", ["messages", "echo"]));
    await stores.close();
    const config = join(dir, "gateway.json");
    writeFileSync(
      config,
      JSON.stringify({
        upstreams: { messages: { command: process.execPath, args: [UPSTREAM] } },
        principals: PRINCIPALS,
        stores: `sqlite:${store}`,
      }),
    );
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [CLI, "mcp", "--config", config, "--stdio"],
      env: { PATH: process.env.PATH ?? "", TESSERA_MCP_TOKEN: ALICE_TOKEN },
      stderr: "pipe",
    });
    let stderr = "";
    transport.stderr?.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const client = new Client({ name: "log-test", version: "1.0.0" });
    clients.push(client);
    await client.connect(transport);
    const echoed = await client.callTool({
      name: "messages.echo",
      arguments: { text: SECRET_TEXT },
    });
    expect(echoed.isError ?? false).toBe(false);
    const refused = await client.callTool({
      name: "messages.send_message",
      arguments: { to: "bob", text: SECRET_TEXT },
    });
    expect(refused.isError).toBe(true);
    const deadline = Date.now() + 10_000;
    const decisions = () =>
      stderr
        .split("\n")
        .filter((line) => line.startsWith("{"))
        .map((line) => JSON.parse(line) as Record<string, unknown>)
        .filter((line) => line.msg === "decision");
    while (decisions().length < 2 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(decisions()).toEqual([
      expect.objectContaining({
        outcome: "allowed",
        action: "tools/call",
        resource: "mcp:/messages/echo",
        callId: expect.any(String),
        traceId: expect.any(String),
        principal: expect.objectContaining({ actor: "alice" }),
      }),
      expect.objectContaining({
        outcome: "denied",
        code: expect.any(String),
        reason: expect.any(String),
      }),
    ]);
    expect(stderr).not.toContain(SECRET_TEXT);
    expect(stderr).not.toContain(ALICE_TOKEN);
  }, 60_000);
});
