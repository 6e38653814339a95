import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, it } from "vitest";
import {
  ALICE_TOKEN,
  DAVE_TOKEN,
  type Harness,
  PRINCIPALS,
  principal,
  startHarness,
  textOf,
  toolGrant,
} from "./support.js";

const KEY = "io.tessera/idempotency-key";
const SUPPORT_TOKEN = "alice-support-token-0123456789";
const BILLING_TOKEN = "alice-billing-token-0123456789";
let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

function rpcCode(error: unknown): string | undefined {
  return error instanceof McpError
    ? (error.data as { code?: string } | undefined)?.code
    : undefined;
}

const HEADERS = {
  "content-type": "application/json",
  accept: "application/json, text/event-stream",
};

async function post(url: string, token: string | undefined, body: string, session?: string) {
  const headers: Record<string, string> = { ...HEADERS };
  if (token !== undefined) headers.authorization = `Bearer ${token}`;
  if (session !== undefined) headers["mcp-session-id"] = session;
  return fetch(url, { method: "POST", headers, body });
}

/** A raw MCP session: initialize, then initialized; returns its session ID. */
async function rawSession(url: string, token: string): Promise<string> {
  const init = await post(
    url,
    token,
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
  expect(init.status).toBe(200);
  const session = init.headers.get("mcp-session-id") as string;
  await post(
    url,
    token,
    JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }),
    session,
  );
  return session;
}

describe("hostile input at the MCP gateway", () => {
  it("oversized arguments are a protocol error, and nothing runs", async () => {
    harness = await startHarness({ limits: { maxArgumentBytes: 1024 } }, [
      toolGrant("alice", ["messages", "echo"]),
    ]);
    const alice = await harness.client(ALICE_TOKEN);
    await expect(
      alice.callTool({ name: "messages.echo", arguments: { text: "x".repeat(2000) } }),
    ).rejects.toSatisfy((e) => rpcCode(e) === "invalid_request");
    // A body far past the limit is refused before it is read whole.
    const session = await rawSession(harness.url, ALICE_TOKEN);
    const huge = await post(
      harness.url,
      ALICE_TOKEN,
      JSON.stringify({
        jsonrpc: "2.0",
        id: 9,
        method: "tools/call",
        params: { name: "messages.echo", arguments: { text: "y".repeat(200_000) } },
      }),
      session,
    );
    expect(huge.status).toBe(413);
    expect(harness.counts()).toBe(0);
    const events = await harness.audit.read();
    expect(events.some((e) => e.reason === "invalid_request")).toBe(true);
  });

  it("principals that differ only in purpose share neither answers nor sessions", async () => {
    const forPurpose = (purpose: string, token: string) => ({
      ...principal("alice", token),
      purpose,
    });
    const supportGrant = toolGrant("alice", ["messages", "echo"]);
    harness = await startHarness(
      {
        principals: [
          ...PRINCIPALS,
          forPurpose("support", SUPPORT_TOKEN),
          forPurpose("billing", BILLING_TOKEN),
        ],
      },
      [{ ...supportGrant, constraints: { purposes: ["support"] } }],
    );
    const call = { name: "messages.echo", arguments: { text: "x" }, _meta: { [KEY]: "k-p" } };
    const support = await harness.client(SUPPORT_TOKEN);
    expect((await support.callTool(call)).isError).toBeFalsy();
    // The same key from the purpose the grant refuses is that principal's own call: refused,
    // never the other's recorded result.
    const billing = await harness.client(BILLING_TOKEN);
    const refused = await billing.callTool(call);
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toBe("tool_unavailable");
    expect(harness.counts("echo")).toBe(1);
    // Nor may it use the other's MCP session: answered as a session that does not exist.
    const session = await rawSession(harness.url, SUPPORT_TOKEN);
    const hijack = await post(
      harness.url,
      BILLING_TOKEN,
      JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
      session,
    );
    expect(hijack.status).toBe(404);
  });

  it("unknown tools and names with path characters are refused like a tool never granted", async () => {
    harness = await startHarness({}, [toolGrant("alice", ["messages"], { scope: "descendants" })]);
    const alice = await harness.client(ALICE_TOKEN);
    for (const name of [
      "messages.nope",
      "messages.echo/../slow",
      "messages/echo",
      "../messages.echo",
      "messages.send_message\u0000",
      "echo",
    ]) {
      const result = await alice.callTool({ name, arguments: { text: "x" } });
      expect(result.isError, name).toBe(true);
      expect(textOf(result), name).toBe("tool_unavailable");
    }
    // A bound argument that is not a safe path segment is refused before the kernel.
    for (const to of ["../bob", "bob/carol", ".."]) {
      const result = await alice.callTool({
        name: "messages.send_message",
        arguments: { to, text: "x" },
      });
      expect(textOf(result), to).toBe("invalid_request");
    }
    expect(harness.counts()).toBe(0);
  });

  it("malformed JSON-RPC, missing or wrong bearer tokens and foreign sessions are refused", async () => {
    harness = await startHarness({}, [toolGrant("alice", ["messages", "echo"])]);
    const url = harness.url;
    expect((await post(url, undefined, "{}")).status).toBe(401);
    const wrongToken = await post(url, "not-a-token", "{}");
    expect(wrongToken.status).toBe(401);
    expect(wrongToken.headers.get("www-authenticate")).toMatch(/^Bearer/);
    const notJson = await post(url, ALICE_TOKEN, "{not json");
    expect(notJson.status).toBe(400);
    expect(((await notJson.json()) as { error: { code: number } }).error.code).toBe(-32700);
    // No session, not an initialize request.
    expect(
      (
        await post(
          url,
          ALICE_TOKEN,
          JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
        )
      ).status,
    ).toBe(400);
    const session = await rawSession(url, ALICE_TOKEN);
    // Not JSON-RPC inside a session.
    const junk = await post(url, ALICE_TOKEN, JSON.stringify({ hello: "world" }), session);
    expect(junk.status).toBe(400);
    // Another principal presenting alice's session ID is told it does not exist.
    const hijack = await post(
      url,
      DAVE_TOKEN,
      JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
      session,
    );
    expect(hijack.status).toBe(404);
    expect((await post(url, ALICE_TOKEN, "{}", "no-such-session")).status).toBe(404);
    // Malformed tools/call params are invalid params (-32602), never an internal error, and
    // the message is one line naming the field.
    for (const [id, params, field] of [
      [3, { name: "messages.echo", arguments: "not an object" }, "params.arguments"],
      [4, {}, "params.name"],
      [5, undefined, "params"],
      [6, { name: 7 }, "params.name"],
    ] as const) {
      const answer = await post(
        url,
        ALICE_TOKEN,
        JSON.stringify({ jsonrpc: "2.0", id, method: "tools/call", params }),
        session,
      );
      const body = (await answer.json()) as {
        id: number;
        error?: { code: number; message: string };
      };
      expect({ id: body.id, code: body.error?.code }).toEqual({ id, code: -32602 });
      expect(body.error?.message).toContain(`invalid tools/call request: ${field}: `);
      expect(body.error?.message).not.toContain("\n");
    }
    // A bad idempotency key is a protocol error: not a string, or one that would put a
    // control, bidi or line-separator character into audit as the call's ID.
    const alice = await harness.client(ALICE_TOKEN);
    for (const key of [
      42,
      "",
      "k".repeat(257),
      "k\u0000",
      "k\r\nforged",
      "k\u001b[2J",
      "k\u202e",
      "k\udc00",
    ]) {
      await expect(
        alice.callTool({ name: "messages.echo", arguments: { text: "x" }, _meta: { [KEY]: key } }),
        JSON.stringify(key),
      ).rejects.toSatisfy((e) => rpcCode(e) === "invalid_request");
    }
    expect(harness.counts()).toBe(0);
    // A printable key of any other kind is the caller's own.
    const ok = await alice.callTool({
      name: "messages.echo",
      arguments: { text: "x" },
      _meta: { [KEY]: "../é/👩‍💻" },
    });
    expect(ok.isError).not.toBe(true);
  });

  it("the same JSON-RPC id sent twice in one session is answered from the record, not re-run", async () => {
    harness = await startHarness({}, [toolGrant("alice", ["messages", "echo"])]);
    const session = await rawSession(harness.url, ALICE_TOKEN);
    const call = JSON.stringify({
      jsonrpc: "2.0",
      id: 7,
      method: "tools/call",
      params: { name: "messages.echo", arguments: { text: "once" } },
    });
    const first = await (await post(harness.url, ALICE_TOKEN, call, session)).json();
    const second = await (await post(harness.url, ALICE_TOKEN, call, session)).json();
    expect(second).toEqual(first);
    expect(harness.counts("echo")).toBe(1);
    // The same id in another session is another call.
    const other = await rawSession(harness.url, ALICE_TOKEN);
    await post(harness.url, ALICE_TOKEN, call, other);
    expect(harness.counts("echo")).toBe(2);
  });

  it("a JSON-RPC id too long to key a call is a protocol error: nothing claimed or run, one bounded event", async () => {
    harness = await startHarness({}, [toolGrant("alice", ["messages", "echo"])]);
    const session = await rawSession(harness.url, ALICE_TOKEN);
    const call = (id: string, meta?: Record<string, string>) =>
      JSON.stringify({
        jsonrpc: "2.0",
        id,
        method: "tools/call",
        params: {
          name: "messages.echo",
          arguments: { text: "x" },
          ...(meta ? { _meta: meta } : {}),
        },
      });
    const long = "i".repeat(60_000);
    const answer = await post(harness.url, ALICE_TOKEN, call(long), session);
    expect(answer.status).toBe(200);
    const body = (await answer.json()) as { id: unknown; error?: { code: number; data?: unknown } };
    // Before: a tool result refusing invalid_request, its claim and event keyed by the whole id.
    expect(body.id).toBe(long);
    expect(body.error?.code).toBe(-32602);
    expect(body.error?.data).toEqual({ code: "invalid_request" });
    expect(harness.counts("echo")).toBe(0);
    const events = await harness.audit.read();
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ reason: "invalid_request", code: "invalid_request" });
    expect(events[0]?.callId.length).toBeLessThan(200);
    expect(events[0]?.callId).toMatch(/:sha256:[0-9a-f]{64}$/);
    // With an idempotency key the id keys nothing: the call runs; and a 256-character id does.
    const keyed = await post(harness.url, ALICE_TOKEN, call(long, { [KEY]: "long-id" }), session);
    expect(((await keyed.json()) as { result?: unknown }).result).toBeDefined();
    const fits = await post(harness.url, ALICE_TOKEN, call("j".repeat(254)), session);
    expect(((await fits.json()) as { result?: unknown }).result).toBeDefined();
    expect(harness.counts("echo")).toBe(2);
  });
});

describe("HTTP sessions", () => {
  it("a session idle past the limit is closed when another opens", async () => {
    harness = await startHarness({ limits: { sessionIdleMs: 200 } }, [
      toolGrant("alice", ["messages", "echo"]),
    ]);
    const idle = await rawSession(harness.url, ALICE_TOKEN);
    const list = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" });
    expect((await post(harness.url, ALICE_TOKEN, list, idle)).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 300));
    await rawSession(harness.url, ALICE_TOKEN);
    expect((await post(harness.url, ALICE_TOKEN, list, idle)).status).toBe(404);
  });
});

describe("upstream failures are reported, audited and never retried", () => {
  it("a malformed upstream result settles the claim failed; a replay gets the same error", async () => {
    harness = await startHarness({}, [toolGrant("alice", ["messages", "malformed"])]);
    const alice = await harness.client(ALICE_TOKEN);
    const call = { name: "messages.malformed", arguments: {}, _meta: { [KEY]: "m-1" } };
    await expect(alice.callTool(call)).rejects.toSatisfy((e) => rpcCode(e) === "upstream_failed");
    await expect(alice.callTool(call)).rejects.toSatisfy((e) => rpcCode(e) === "upstream_failed");
    expect(harness.counts("malformed")).toBe(1);
    const event = (await harness.audit.read({ callId: "m-1" })).at(-1);
    expect(event).toMatchObject({ reason: "delivery_failed", receipt: "failed" });
    expect(await harness.claims.listInDoubt()).toHaveLength(0);
  });

  it("an upstream that hangs past the timeout leaves the call in doubt, not retried", async () => {
    harness = await startHarness({ limits: { upstreamTimeoutMs: 300 } }, [
      toolGrant("alice", ["messages", "slow"]),
    ]);
    const alice = await harness.client(ALICE_TOKEN);
    const call = { name: "messages.slow", arguments: { ms: 2000 }, _meta: { [KEY]: "t-1" } };
    await expect(alice.callTool(call)).rejects.toSatisfy((e) => rpcCode(e) === "call_in_doubt");
    await expect(alice.callTool(call)).rejects.toSatisfy((e) => rpcCode(e) === "call_in_doubt");
    expect(harness.counts("slow")).toBe(1);
    expect(await harness.claims.listInDoubt()).toHaveLength(1);
    const event = (await harness.audit.read({ callId: "t-1" })).at(-1);
    expect(event).toMatchObject({ reason: "delivery_failed", receipt: "in_doubt" });
  });

  it("an upstream that exits mid-call leaves it in doubt; the next call runs on a restarted upstream", async () => {
    harness = await startHarness({}, [
      toolGrant("alice", ["messages", "crash"]),
      toolGrant("alice", ["messages", "echo"]),
    ]);
    const alice = await harness.client(ALICE_TOKEN);
    await expect(alice.callTool({ name: "messages.crash", arguments: {} })).rejects.toSatisfy(
      (e) => rpcCode(e) === "call_in_doubt",
    );
    const next = await alice.callTool({ name: "messages.echo", arguments: { text: "x" } });
    expect(textOf(next)).toBe("x");
    expect(harness.counts("crash")).toBe(1);
    expect(harness.counts()).toBe(2);
  });
});
