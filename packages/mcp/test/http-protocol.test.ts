import { afterEach, describe, expect, it } from "vitest";
import { ALICE_TOKEN, type Harness, startHarness, toolGrant } from "./support.js";

/**
 * The gateway's Streamable HTTP side (the SDK's server transport, JSON-response mode) answers
 * as the protocol asks: its refusals, 202 for notifications, batches, one GET event stream per
 * session, DELETE ending the session.
 */
let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const BOTH = "application/json, text/event-stream";

async function send(
  url: string,
  init: { method?: string; body?: unknown; session?: string; headers?: Record<string, string> },
) {
  const headers: Record<string, string> = {
    authorization: `Bearer ${ALICE_TOKEN}`,
    "content-type": "application/json",
    accept: BOTH,
    ...init.headers,
  };
  if (init.session !== undefined) headers["mcp-session-id"] = init.session;
  return fetch(url, {
    method: init.method ?? "POST",
    headers,
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
  });
}

const initialize = {
  jsonrpc: "2.0",
  id: 0,
  method: "initialize",
  params: {
    protocolVersion: "2025-06-18",
    capabilities: {},
    clientInfo: { name: "raw", version: "1" },
  },
};

async function open(url: string): Promise<string> {
  const init = await send(url, { body: initialize });
  expect(init.status).toBe(200);
  expect(init.headers.get("content-type")).toMatch(/^application\/json/);
  const session = init.headers.get("mcp-session-id") as string;
  expect(session).toMatch(/^[0-9a-f-]{36}$/);
  const done = await send(url, {
    body: { jsonrpc: "2.0", method: "notifications/initialized" },
    session,
  });
  expect(done.status).toBe(202);
  return session;
}

describe("the gateway's Streamable HTTP", () => {
  it("refuses what the protocol refuses: Accept, Content-Type, re-initialize, batch size, versions", async () => {
    harness = await startHarness({}, [toolGrant("alice", ["messages", "echo"])]);
    const url = harness.url;
    expect(
      (await send(url, { body: initialize, headers: { accept: "application/json" } })).status,
    ).toBe(406);
    expect(
      (await send(url, { body: initialize, headers: { "content-type": "text/plain" } })).status,
    ).toBe(415);
    const session = await open(url);
    expect((await send(url, { body: initialize, session })).status).toBe(400);
    const list = { jsonrpc: "2.0", id: 1, method: "tools/list" };
    expect(
      (await send(url, { body: list, session, headers: { "mcp-protocol-version": "1999-01-01" } }))
        .status,
    ).toBe(400);
    expect(
      (await send(url, { body: Array.from({ length: 101 }, () => list), session })).status,
    ).toBe(400);
    expect((await send(url, { method: "PUT", body: list, session })).status).toBe(405);
  });

  it("answers a batch with an array, one GET event stream per session, DELETE ends the session", async () => {
    harness = await startHarness({}, [toolGrant("alice", ["messages", "echo"])]);
    const url = harness.url;
    const session = await open(url);
    const batch = await send(url, {
      session,
      body: [
        { jsonrpc: "2.0", id: "a", method: "tools/list" },
        { jsonrpc: "2.0", id: "b", method: "ping" },
      ],
    });
    expect(batch.status).toBe(200);
    const answers = (await batch.json()) as { id: string }[];
    expect(answers.map((a) => a.id)).toEqual(["a", "b"]);

    const stream = await send(url, {
      method: "GET",
      session,
      headers: { accept: "text/event-stream" },
    });
    expect(stream.status).toBe(200);
    expect(stream.headers.get("content-type")).toBe("text/event-stream");
    const second = await send(url, {
      method: "GET",
      session,
      headers: { accept: "text/event-stream" },
    });
    expect(second.status).toBe(409);
    await stream.body?.cancel();

    expect((await send(url, { method: "DELETE", session })).status).toBe(200);
    expect(
      (await send(url, { body: { jsonrpc: "2.0", id: 2, method: "ping" }, session })).status,
    ).toBe(404);
  });

  it("refuses a batch that repeats a request id, running nothing; distinct ids each get one answer", async () => {
    harness = await startHarness({}, [toolGrant("alice", ["messages", "echo"])]);
    const url = harness.url;
    const session = await open(url);
    const echo = (id: string | number, text: string) => ({
      jsonrpc: "2.0",
      id,
      method: "tools/call",
      params: { name: "messages.echo", arguments: { text } },
    });
    for (const body of [
      [echo("dup", "one"), echo("dup", "one")],
      [echo(7, "a"), { jsonrpc: "2.0", id: "x", method: "ping" }, echo(7, "b")],
    ]) {
      const refused = await send(url, { session, body });
      expect(refused.status).toBe(400);
      expect(await refused.json()).toMatchObject({ error: { code: -32600 }, id: null });
    }
    expect(harness.counts("echo")).toBe(0);

    // 1 and "1" are two ids.
    const batch = await send(url, { session, body: [echo(1, "n"), echo("1", "s")] });
    expect(batch.status).toBe(200);
    const answers = (await batch.json()) as {
      id: unknown;
      result: { content: { text: string }[] };
    }[];
    expect(answers.map((a) => [a.id, a.result.content[0]?.text])).toEqual([
      [1, "n"],
      ["1", "s"],
    ]);
    expect(harness.counts("echo")).toBe(2);
  });

  it("refuses a request whose id is still being answered in the session; the first gets its answer", async () => {
    harness = await startHarness({}, [toolGrant("alice", ["messages", "slow"])]);
    const url = harness.url;
    const session = await open(url);
    const call = {
      jsonrpc: "2.0",
      id: 5,
      method: "tools/call",
      params: { name: "messages.slow", arguments: { ms: 1500 } },
    };
    const first = send(url, { session, body: call });
    while (harness.counts("slow") === 0) await new Promise((resolve) => setTimeout(resolve, 20));
    const second = await send(url, { session, body: call });
    expect(second.status).toBe(409);
    expect(await second.json()).toMatchObject({ error: { code: -32600 }, id: null });
    // Before, the second took the id's route and the first POST never got an answer.
    const answered = await first;
    expect(answered.status).toBe(200);
    const body = (await answered.json()) as { id: number; result: { content: { text: string }[] } };
    expect([body.id, body.result.content[0]?.text]).toEqual([5, "slept 1500"]);
    // Once answered, the id may come again: a replay, answered from the record.
    const replay = await send(url, { session, body: call });
    expect(((await replay.json()) as typeof body).result.content[0]?.text).toBe("slept 1500");
    expect(harness.counts("slow")).toBe(1);
  });

  it('gives the JSON-RPC ids 7 and "7" of one session call IDs of their own, in the answer and in audit', async () => {
    harness = await startHarness({}, [toolGrant("alice", ["messages", "echo"])]);
    const session = await open(harness.url);
    const callIds: unknown[] = [];
    for (const id of [7, "7"]) {
      const answer = await send(harness.url, {
        body: {
          jsonrpc: "2.0",
          id,
          method: "tools/call",
          params: { name: "messages.echo", arguments: { text: typeof id } },
        },
        session,
      });
      const body = (await answer.json()) as {
        id: unknown;
        result?: { _meta?: Record<string, unknown> };
      };
      expect(body.id).toBe(id);
      callIds.push(body.result?._meta?.["io.tessera/call-id"]);
    }
    expect(callIds).toEqual([`${session}:7`, `${session}:"7"`]);
    const audited = (await harness.audit.read()).map((event) => event.callId);
    expect(audited).toEqual(callIds);
    expect(harness.counts("echo")).toBe(2);
  });
});
