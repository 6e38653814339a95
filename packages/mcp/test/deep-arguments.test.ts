import { MAX_JSON_DEPTH } from "@tessera/core/store-kit";
import { afterEach, describe, expect, it } from "vitest";
import { ALICE_TOKEN, type Harness, startHarness, textOf, toolGrant } from "./support.js";

/**
 * Tool arguments nested past MAX_JSON_DEPTH: refused `invalid_request` before they are hashed
 * (the recursive hash overflowed the stack at 5,000 levels: -32603 and no audit event).
 */

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const HEADERS = {
  "content-type": "application/json",
  accept: "application/json, text/event-stream",
};

async function post(url: string, body: string, session?: string): Promise<Response> {
  const headers: Record<string, string> = { ...HEADERS, authorization: `Bearer ${ALICE_TOKEN}` };
  if (session !== undefined) headers["mcp-session-id"] = session;
  return fetch(url, { method: "POST", headers, body });
}

/** The JSON-RPC message of an answer sent as JSON or as one SSE event. */
async function messageOf(
  response: Response,
): Promise<{ error?: { code: number; data?: { code?: string } } }> {
  const text = await response.text();
  const data =
    text.startsWith("event:") || text.startsWith("data:")
      ? (text.split("\n").find((line) => line.startsWith("data:")) ?? "").slice(5)
      : text;
  return JSON.parse(data);
}

async function session(url: string): Promise<string> {
  const init = await post(
    url,
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
  );
  const id = init.headers.get("mcp-session-id") as string;
  await init.text();
  await (
    await post(url, JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }), id)
  ).text();
  return id;
}

/** `levels` nested objects around a string, written as text (no recursive serializer). */
function deepJson(levels: number): string {
  return `${'{"a":'.repeat(levels)}"x"${"}".repeat(levels)}`;
}

describe("deeply nested tool arguments", () => {
  it.each([MAX_JSON_DEPTH + 1, 5_000, 20_000, 21_500])(
    "%i levels: invalid_request (-32602), one audit event, nothing forwarded",
    async (levels) => {
      harness = await startHarness({}, [toolGrant("alice", ["messages", "echo"])]);
      const id = await session(harness.url);
      const response = await post(
        harness.url,
        `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"messages.echo","arguments":{"text":"hi","deep":${deepJson(levels)}}}}`,
        id,
      );
      const message = await messageOf(response);
      expect(message.error?.code).toBe(-32602);
      expect(message.error?.data?.code).toBe("invalid_request");
      const events = await harness.audit.read();
      expect(events.map((e) => [e.reason, e.code])).toEqual([
        ["invalid_request", "invalid_request"],
      ]);
      expect(events[0]?.detail).toMatch(/nested deeper than 64 levels/);
      expect(harness.counts()).toBe(0);
    },
  );

  it(`${MAX_JSON_DEPTH} levels are forwarded`, async () => {
    harness = await startHarness({}, [toolGrant("alice", ["messages", "echo"])]);
    const alice = await harness.client(ALICE_TOKEN);
    let deep: unknown = "x";
    for (let i = 1; i < MAX_JSON_DEPTH; i++) deep = { a: deep };
    const result = await alice.callTool({ name: "messages.echo", arguments: { text: "hi", deep } });
    expect(textOf(result)).toContain("hi");
    expect(harness.counts()).toBe(1);
  });
});
