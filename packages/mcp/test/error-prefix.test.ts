import { CallToolResultSchema, McpError } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, it } from "vitest";
import { ALICE_TOKEN, type Harness, startHarness, toolGrant } from "./support.js";

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

describe("a gateway error as the client reads it", () => {
  it("carries the MCP prefix once, then the gateway's own message", async () => {
    harness = await startHarness({ limits: { maxArgumentBytes: 1024 } }, [
      toolGrant("alice", ["messages", "echo"]),
    ]);
    const alice = await harness.client(ALICE_TOKEN);
    const error = await alice
      .callTool({ name: "messages.echo", arguments: { text: "x".repeat(2000) } })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(error).toBeInstanceOf(McpError);
    const message = (error as McpError).message;
    expect(message).toMatch(/^MCP error -32602: /);
    expect(message.match(/MCP error/g)).toHaveLength(1);
  });

  it("a malformed tools/call carries the prefix once, and its code in data", async () => {
    harness = await startHarness({}, [toolGrant("alice", ["messages", "echo"])]);
    const alice = await harness.client(ALICE_TOKEN);
    const error = await alice
      .request(
        { method: "tools/call", params: { name: "messages.echo", arguments: "x" } },
        CallToolResultSchema,
      )
      .then(
        () => undefined,
        (e: unknown) => e as McpError,
      );
    expect(error?.code).toBe(-32602);
    expect(error?.data).toEqual({ code: "invalid_request" });
    expect(error?.message).toMatch(
      /^MCP error -32602: invalid tools\/call request: params\.arguments: /,
    );
    expect(error?.message.match(/MCP error/g)).toHaveLength(1);
  });

  it("a replayed upstream_failed reads exactly as the first call's error", async () => {
    harness = await startHarness({}, [toolGrant("alice", ["messages", "malformed"])]);
    const alice = await harness.client(ALICE_TOKEN);
    const call = {
      name: "messages.malformed",
      arguments: {},
      _meta: { "io.tessera/idempotency-key": "failed-once" },
    };
    const failure = () =>
      alice.callTool(call).then(
        () => undefined,
        (e: unknown) => e as McpError,
      );
    const first = await failure();
    const replay = await failure();
    expect(first?.data).toEqual({ code: "upstream_failed" });
    expect(replay?.data).toEqual({ code: "upstream_failed" });
    expect(replay?.code).toBe(-32012);
    expect(replay?.message).toBe(first?.message);
    expect(replay?.message.match(/MCP error/g)).toHaveLength(1);
    expect(harness.counts("malformed")).toBe(1);
  });
});
