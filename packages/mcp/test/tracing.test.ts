import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  ALICE_TOKEN,
  DAVE_TOKEN,
  type Harness,
  type HttpUpstream,
  startHarness,
  startHttpUpstream,
  textOf,
  toolGrant,
  UPSTREAM,
} from "./support.js";

/**
 * One trace through the gateway: the caller's `traceparent` (HTTP header, or `_meta` of the
 * request) becomes the audit event's trace ID, the gateway's spans join it (call → decide →
 * store write, call → upstream), and the upstream receives the same trace with the upstream
 * span as its parent. A refusal has no upstream span and no upstream call. The spans carry the
 * tool, the outcome and the code; never the arguments, results or tokens.
 */
const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT = "00f067aa0ba902b7";
const SECRET_TEXT = "argument-text-that-must-not-appear";
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
let dir: string;
let countFile: string;
let web: HttpUpstream;
let harness: Harness;

beforeAll(async () => {
  trace.setGlobalTracerProvider(provider);
  dir = mkdtempSync(join(tmpdir(), "tessera-mcp-trace-"));
  countFile = join(dir, "count.jsonl");
  web = await startHttpUpstream();
  harness = await startHarness(
    {
      upstreams: {
        messages: {
          command: process.execPath,
          args: [UPSTREAM],
          env: { COUNT_FILE: countFile, PATH: process.env.PATH ?? "" },
        },
        web: { url: web.url },
      },
      tools: {},
    },
    [
      toolGrant("alice", ["web", "echo"]),
      toolGrant("alice", ["messages", "echo"]),
      toolGrant("alice", ["messages", "malformed"]),
    ],
  );
}, 30_000);

afterAll(async () => {
  await harness?.close();
  await web?.close();
  rmSync(dir, { recursive: true, force: true });
  trace.disable();
  await provider.shutdown();
});

beforeEach(() => exporter.reset());

async function httpClient(
  token: string,
  traceparent?: string,
  tracestate?: string,
): Promise<Client> {
  const client = new Client({ name: "trace-test", version: "1.0.0" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(harness.url), {
      requestInit: {
        headers: {
          authorization: `Bearer ${token}`,
          ...(traceparent === undefined ? {} : { traceparent }),
          ...(tracestate === undefined ? {} : { tracestate }),
        },
      },
    }),
  );
  return client;
}

/** One call over HTTP with these trace headers: the `tracestate` its upstream POST carried. */
async function stateSentUpstream(traceparent: string, tracestate: string): Promise<unknown> {
  const client = await httpClient(ALICE_TOKEN, traceparent, tracestate);
  const before = web.seen.length;
  try {
    await client.callTool({ name: "web.echo", arguments: { text: "s" } });
  } finally {
    await client.close();
  }
  const post = web.seen.slice(before).find((r) => r.method === "tools/call");
  expect(post?.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/);
  return post?.tracestate;
}

function spans(name: string): ReadableSpan[] {
  return exporter.getFinishedSpans().filter((span) => span.name === name);
}

function one(name: string): ReadableSpan {
  const found = spans(name);
  expect(found).toHaveLength(1);
  return found[0] as ReadableSpan;
}

function parentOf(span: ReadableSpan): string | undefined {
  return span.parentSpanContext?.spanId;
}

function callIdOf(result: unknown): string {
  return (result as { _meta: Record<string, string> })._meta["io.tessera/call-id"] as string;
}

/** No span attribute carries an argument, a result or a token. */
function expectNoPayloads(): void {
  const text = JSON.stringify(exporter.getFinishedSpans().map((span) => span.attributes));
  expect(text).not.toContain(SECRET_TEXT);
  expect(text).not.toContain(ALICE_TOKEN);
  expect(text).not.toContain(DAVE_TOKEN);
}

describe("traces through the gateway", () => {
  it("an allowed HTTP call: the caller's trace in the audit event, the spans and the upstream's traceparent", async () => {
    const client = await httpClient(ALICE_TOKEN, `00-${TRACE}-${PARENT}-01`);
    const before = web.seen.length;
    try {
      const result = await client.callTool({ name: "web.echo", arguments: { text: SECRET_TEXT } });
      expect(textOf(result)).toBe(SECRET_TEXT);
      const events = harness.audit.events.filter((e) => e.callId === callIdOf(result));
      expect(events.length).toBeGreaterThan(0);
      for (const event of events) expect(event.traceId).toBe(TRACE);
    } finally {
      await client.close();
    }

    const call = one("tessera.mcp.tools_call");
    expect(call.kind).toBe(SpanKind.SERVER);
    expect(call.spanContext().traceId).toBe(TRACE);
    expect(parentOf(call)).toBe(PARENT);
    expect(call.attributes).toEqual({ "tessera.tool": "web.echo", "tessera.outcome": "allowed" });

    const decide = one("tessera.decide");
    expect(parentOf(decide)).toBe(call.spanContext().spanId);
    expect(decide.attributes["tessera.outcome"]).toBe("allowed");
    const write = one("tessera.store.write");
    expect(parentOf(write)).toBe(decide.spanContext().spanId);
    expect(write.attributes["tessera.outcome"]).toBe("recorded");

    const upstream = one("tessera.upstream");
    expect(upstream.kind).toBe(SpanKind.CLIENT);
    expect(parentOf(upstream)).toBe(call.spanContext().spanId);
    expect(upstream.attributes).toEqual({
      "tessera.tool": "web.echo",
      "tessera.outcome": "result",
    });
    for (const span of exporter.getFinishedSpans()) expect(span.spanContext().traceId).toBe(TRACE);

    // The tools/call POST upstream, and only it, carried the trace: parent = the upstream span.
    const posts = web.seen.slice(before).filter((r) => r.method === "tools/call");
    expect(posts).toHaveLength(1);
    expect(posts[0]?.traceparent).toBe(`00-${TRACE}-${upstream.spanContext().spanId}-01`);
    expectNoPayloads();
  });

  it("a denied call: no upstream span, no upstream call, the code as an attribute, the trace in audit", async () => {
    const client = await httpClient(DAVE_TOKEN, `00-${TRACE}-${PARENT}-01`);
    const before = web.echoes();
    const requests = web.seen.length;
    try {
      const result = await client.callTool({ name: "web.echo", arguments: { text: SECRET_TEXT } });
      expect(result.isError).toBe(true);
      const code = (result._meta as Record<string, string>)["io.tessera/code"];
      expect(code).toBe("tool_unavailable");
      const event = harness.audit.events.find((e) => e.callId === callIdOf(result));
      expect(event?.outcome).toBe("denied");
      expect(event?.traceId).toBe(TRACE);

      const call = one("tessera.mcp.tools_call");
      expect(call.attributes).toEqual({
        "tessera.tool": "web.echo",
        "tessera.outcome": "denied",
        "tessera.code": code,
      });
      expect(one("tessera.decide").attributes).toEqual({
        "tessera.outcome": "denied",
        "tessera.code": code,
      });
      expect(spans("tessera.upstream")).toHaveLength(0);
      expect(web.echoes()).toBe(before);
      expect(web.seen.slice(requests).filter((r) => r.method === "tools/call")).toHaveLength(0);
      expectNoPayloads();
    } finally {
      await client.close();
    }
  });

  it("an unknown tool: refused by the gateway itself, its act's write a child of the call", async () => {
    const client = await httpClient(ALICE_TOKEN, `00-${TRACE}-${PARENT}-01`);
    try {
      const result = await client.callTool({ name: "web.nope", arguments: {} });
      expect(result.isError).toBe(true);
      const call = one("tessera.mcp.tools_call");
      // A name outside the catalog is the caller's text: it is not an attribute.
      expect(call.attributes).toEqual({
        "tessera.outcome": "denied",
        "tessera.code": "tool_unavailable",
      });
      expect(parentOf(one("tessera.store.write"))).toBe(call.spanContext().spanId);
      expect(spans("tessera.decide")).toHaveLength(0);
    } finally {
      await client.close();
    }
  });

  it("an upstream failure: the upstream span and the call span end in error with the code", async () => {
    const client = await httpClient(ALICE_TOKEN, `00-${TRACE}-${PARENT}-01`);
    try {
      const failed = await client.callTool({ name: "messages.malformed", arguments: {} }).then(
        () => undefined,
        (error: { data?: { code?: string } }) => error.data?.code,
      );
      expect(failed).toBe("upstream_failed");
    } finally {
      await client.close();
    }
    const call = one("tessera.mcp.tools_call");
    expect(call.attributes).toEqual({
      "tessera.tool": "messages.malformed",
      "tessera.outcome": "error",
      "tessera.code": "upstream_failed",
    });
    expect(call.status.code).toBe(SpanStatusCode.ERROR);
    const upstream = one("tessera.upstream");
    expect(upstream.attributes).toEqual({
      "tessera.tool": "messages.malformed",
      "tessera.outcome": "failed",
      "tessera.code": "upstream_failed",
    });
    expect(upstream.status.code).toBe(SpanStatusCode.ERROR);
    expect(one("tessera.decide").attributes["tessera.outcome"]).toBe("allowed");
    // The act before forwarding, then the failure's own event: two writes, both in the trace.
    expect(spans("tessera.store.write").length).toBeGreaterThanOrEqual(2);
  });

  it("over stdio: the request's _meta.traceparent is the trace, and the stdio upstream gets it in _meta", async () => {
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await harness.gateway.serve(serverSide, ALICE_TOKEN);
    const client = new Client({ name: "stdio-trace", version: "1.0.0" });
    await client.connect(clientSide);
    try {
      const result = await client.callTool({
        name: "messages.echo",
        arguments: { text: "hi" },
        _meta: { traceparent: `00-${TRACE}-${PARENT}-01` },
      });
      expect(textOf(result)).toBe("hi");
      expect(harness.audit.events.find((e) => e.callId === callIdOf(result))?.traceId).toBe(TRACE);
    } finally {
      await client.close();
    }
    const upstream = one("tessera.upstream");
    const lines = readFileSync(countFile, "utf8")
      .split("\n")
      .filter((line) => line !== "")
      .map((line) => JSON.parse(line) as { tool: string; traceparent?: string });
    expect(lines.at(-1)).toMatchObject({
      tool: "echo",
      traceparent: `00-${TRACE}-${upstream.spanContext().spanId}-01`,
    });
  });

  it("the caller's tracestate goes upstream with its trace, unchanged; never without a valid traceparent", async () => {
    const traceparent = `00-${TRACE}-${PARENT}-01`;
    expect(await stateSentUpstream(traceparent, "congo=t61rcWkgMzE, rojo=00f067aa0ba902b7")).toBe(
      "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7",
    );
    // The SDK's spans carry it too (a sampler or exporter may read it).
    const upstream = exporter.getFinishedSpans().find((s) => s.name === "tessera.upstream");
    expect(upstream?.spanContext().traceState?.get("congo")).toBe("t61rcWkgMzE");
    // A broken traceparent starts a trace of its own: the caller's state is not carried into it.
    expect(await stateSentUpstream(`00-${"0".repeat(32)}-${PARENT}-01`, "congo=x")).toBeUndefined();
    // A state that does not parse is dropped whole, the trace still goes.
    expect(await stateSentUpstream(traceparent, "congo=x,Bad Key=1")).toBeUndefined();
    expect(await stateSentUpstream(traceparent, `congo=${"x".repeat(600)}`)).toBeUndefined();
  });

  it("over stdio the tracestate rides in _meta beside the traceparent", async () => {
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await harness.gateway.serve(serverSide, ALICE_TOKEN);
    const client = new Client({ name: "stdio-state", version: "1.0.0" });
    await client.connect(clientSide);
    try {
      await client.callTool({
        name: "messages.echo",
        arguments: { text: "st" },
        _meta: { traceparent: `00-${TRACE}-${PARENT}-01`, tracestate: "rojo=00f067aa0ba902b7" },
      });
    } finally {
      await client.close();
    }
    const lines = readFileSync(countFile, "utf8")
      .split("\n")
      .filter((line) => line !== "")
      .map((line) => JSON.parse(line) as { tracestate?: string });
    expect(lines.at(-1)?.tracestate).toBe("rojo=00f067aa0ba902b7");
  });

  it("no traceparent: the audit event carries the trace the SDK started, and the upstream joins it", async () => {
    const client = await httpClient(ALICE_TOKEN);
    const before = web.seen.length;
    try {
      const result = await client.callTool({ name: "web.echo", arguments: { text: "x" } });
      const call = one("tessera.mcp.tools_call");
      expect(parentOf(call)).toBeUndefined();
      const traceId = call.spanContext().traceId;
      expect(traceId).toMatch(/^[0-9a-f]{32}$/);
      expect(traceId).not.toBe(TRACE);
      expect(harness.audit.events.find((e) => e.callId === callIdOf(result))?.traceId).toBe(
        traceId,
      );
      const post = web.seen.slice(before).find((r) => r.method === "tools/call");
      expect(post?.traceparent?.split("-")[1]).toBe(traceId);
    } finally {
      await client.close();
    }
  });

  it("two calls of one trace at once are each decided and recorded (the trace ID is not the call's key)", async () => {
    const client = await httpClient(ALICE_TOKEN, `00-${TRACE}-${PARENT}-01`);
    try {
      const results = await Promise.all(
        ["a", "b", "c"].map((text) => client.callTool({ name: "web.echo", arguments: { text } })),
      );
      expect(results.map(textOf)).toEqual(["a", "b", "c"]);
      for (const result of results) {
        const events = harness.audit.events.filter((e) => e.callId === callIdOf(result));
        expect(
          events.map((e) => [e.outcome, e.traceId, e.detail?.includes("tool web.echo")]),
        ).toEqual([["allowed", TRACE, true]]);
      }
      expect(spans("tessera.decide")).toHaveLength(3);
    } finally {
      await client.close();
    }
  });

  it("a caller's unsampled trace: the SDK records no span, the audit event and the upstream still carry the trace", async () => {
    const client = await httpClient(ALICE_TOKEN, `00-${TRACE}-${PARENT}-00`);
    const before = web.seen.length;
    try {
      const result = await client.callTool({ name: "web.echo", arguments: { text: "u" } });
      expect(harness.audit.events.find((e) => e.callId === callIdOf(result))?.traceId).toBe(TRACE);
      const post = web.seen.slice(before).find((r) => r.method === "tools/call");
      expect(post?.traceparent).toMatch(new RegExp(`^00-${TRACE}-[0-9a-f]{16}-00$`));
      expect(exporter.getFinishedSpans()).toHaveLength(0);
    } finally {
      await client.close();
    }
  });

  it("a duplicate's event: the caller's own trace when it sent one, else the first call's", async () => {
    const key = { "io.tessera/idempotency-key": `trace-dup-${Math.random()}` };
    const other = "0af7651916cd43dd8448eb211c80319c";
    const call = async (traceparent?: string) => {
      const client = await httpClient(ALICE_TOKEN);
      try {
        return await client.callTool({
          name: "web.echo",
          arguments: { text: "once" },
          _meta: traceparent === undefined ? key : { ...key, traceparent },
        });
      } finally {
        await client.close();
      }
    };
    const echoes = web.echoes();
    await call(`00-${TRACE}-${PARENT}-01`);
    await call(`00-${other}-${PARENT}-01`);
    await call();
    expect(web.echoes()).toBe(echoes + 1);
    const replays = harness.audit.events.filter(
      (e) =>
        e.reason === "duplicate_call" &&
        e.callId.startsWith(`${key["io.tessera/idempotency-key"]}~`),
    );
    expect(replays.map((e) => e.traceId)).toEqual([other, TRACE]);
  });

  it("a malformed traceparent is ignored: the call gets a trace of its own", async () => {
    const client = await httpClient(ALICE_TOKEN, `00-${"0".repeat(32)}-${PARENT}-01`);
    try {
      const result = await client.callTool({ name: "web.echo", arguments: { text: "y" } });
      const traceId = harness.audit.events.find((e) => e.callId === callIdOf(result))?.traceId;
      expect(traceId).toMatch(/^[0-9a-f]{32}$/);
      expect(traceId).not.toBe("0".repeat(32));
      expect(parentOf(one("tessera.mcp.tools_call"))).toBeUndefined();
    } finally {
      await client.close();
    }
  });

  it("without an SDK (the API's no-op) the trace still reaches the audit event and the upstream", async () => {
    trace.disable();
    const client = await httpClient(ALICE_TOKEN, `00-${TRACE}-${PARENT}-01`, "congo=nosdk");
    const before = web.seen.length;
    try {
      const result = await client.callTool({ name: "web.echo", arguments: { text: "z" } });
      expect(harness.audit.events.find((e) => e.callId === callIdOf(result))?.traceId).toBe(TRACE);
      const post = web.seen.slice(before).find((r) => r.method === "tools/call");
      const [, traceId, parent, flags] = post?.traceparent?.split("-") ?? [];
      expect(traceId).toBe(TRACE);
      // This hop made no span: a fresh parent ID, not the caller's.
      expect(parent).toMatch(/^[0-9a-f]{16}$/);
      expect(parent).not.toBe(PARENT);
      expect(flags).toBe("01");
      expect(post?.tracestate).toBe("congo=nosdk");
      expect(exporter.getFinishedSpans()).toHaveLength(0);
    } finally {
      await client.close();
      trace.setGlobalTracerProvider(provider);
    }
  });
});
