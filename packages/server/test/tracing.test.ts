import { mkdtempSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SpanKind, trace } from "@opentelemetry/api";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { a2uiFunctionCapability, openStores, type StoreBundle } from "@tessera/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen, type RunningServer } from "../src/listen.js";
import { webhookTransport } from "../src/transport/webhook.js";
import { a2uiCall, CATALOG, CATALOG_ID, call, principal, ticket } from "./support/service.js";

/**
 * One trace from the caller's `traceparent` through the decision's audit event, the service's
 * spans (an OpenTelemetry SDK with the in-memory exporter, installed as a host would) and the
 * webhook request the decision caused; a fresh trace when the caller sends none or a broken
 * one; and, before any SDK is installed, the API's no-op path still carrying the trace ID
 * onward. The no-op tests run first: the API's proxy tracer keeps the SDK's once it found it.
 */
const alice = principal("tracing-token-0123456789", {
  namespaceId: "team",
  actor: "asker",
  authority: "host",
  owner: "alice",
});
const PAYLOAD = "SECRET-PAYLOAD-IN-NO-SPAN";
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const received: { url: string; headers: IncomingHttpHeaders; body: Record<string, unknown> }[] = [];
const held: (() => void)[] = [];
let receiver: Server;
let stores: StoreBundle;
let server: RunningServer;

beforeAll(async () => {
  receiver = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => {
      body += chunk;
    });
    req.on("end", () => {
      const parsed = JSON.parse(body) as Record<string, unknown>;
      received.push({ url: req.url ?? "", headers: req.headers, body: parsed });
      if (req.url === "/down") return res.writeHead(503).end();
      const answer = () => {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify(req.url === "/fn" ? { value: 3 } : { ok: true }));
      };
      if (req.url !== "/hold") return answer();
      // Held until two deliveries are in: both requests are then open at once.
      held.push(answer);
      if (held.length === 2) for (const release of held.splice(0)) release();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  stores = await openStores(`sqlite:${join(mkdtempSync(join(tmpdir(), "tracing-")), "t.db")}`);
  for (const to of ["bob", "dave", "erin"]) {
    await stores.grants.add({ ...ticket(`to-${to}`, to), constraints: { maxUses: 100 } });
  }
  await stores.grants.add({
    id: "add",
    namespaceId: "team",
    issuer: "host",
    subject: "asker",
    capabilities: [a2uiFunctionCapability(CATALOG_ID, "add")],
    issuedAt: "2020-01-01T00:00:00.000Z",
  });
  server = await listen({
    stores,
    principals: [alice.config],
    port: 0,
    log: false,
    transport: webhookTransport({
      recipients: {
        bob: { url: `${url}/bob`, secret: "bob-secret-0123456789" },
        dave: { url: `${url}/down`, secret: "dave-secret-0123456789" },
        erin: { url: `${url}/hold`, secret: "erin-secret-0123456789" },
      },
    }),
    a2ui: { catalogs: [CATALOG], functionEndpoint: { url: `${url}/fn`, secret: "fn-secret" } },
  });
});

afterAll(async () => {
  await server?.close();
  await stores?.close();
  receiver?.closeAllConnections();
  receiver?.close();
  trace.disable();
  await provider.shutdown();
});

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT = "00f067aa0ba902b7";

const send = (to: string, callId?: string, traceparent?: string, tracestate?: string) =>
  call(server.url, "POST", "/v1/messages", {
    token: alice.token,
    ...(traceparent === undefined
      ? {}
      : { headers: tracestate === undefined ? { traceparent } : { traceparent, tracestate } }),
    body: {
      recipient: to,
      payload: { text: PAYLOAD },
      ...(callId === undefined ? {} : { callId }),
    },
  });

const auditByTrace = async (traceId: string) =>
  (await call(server.url, "GET", `/v1/audit?traceId=${traceId}`, { token: alice.token })).body
    .events as Record<string, unknown>[];

/** The finished spans of one trace, by name (each name once per test's trace). */
async function spansOf(traceId: string): Promise<Map<string, ReadableSpan>> {
  await provider.forceFlush();
  const spans = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
  return new Map(spans.map((s) => [s.name, s]));
}

function span(spans: Map<string, ReadableSpan>, name: string): ReadableSpan {
  const found = spans.get(name);
  if (found === undefined) throw new Error(`no ${name} span among ${[...spans.keys()]}`);
  return found;
}

const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId;
const idOf = (s: ReadableSpan) => s.spanContext().spanId;

/** No span holds a payload, a token, or an attribute naming one. */
function expectNoPayload(spans: Iterable<ReadableSpan>): void {
  for (const s of spans) {
    const text = JSON.stringify(s.attributes);
    expect(text).not.toContain(PAYLOAD);
    expect(text).not.toContain(alice.token);
    expect(Object.keys(s.attributes).some((k) => /payload|body|token/.test(k))).toBe(false);
  }
}

describe("without an SDK (the API's no-op; first: a tracer found once stays)", () => {
  it("still carries the caller's trace ID to audit and the webhook, with a span ID of its own", async () => {
    // No SDK yet: the API's tracer is the no-op one.
    expect(trace.getTracer("probe").startSpan("probe").isRecording()).toBe(false);
    const trace2 = "77777777777777777777777777777777";
    const answer = await send("bob", "c-noop", `00-${trace2}-8888888888888888-00`);
    expect(answer.body).toMatchObject({ status: "delivered" });
    expect(await auditByTrace(trace2)).toEqual([expect.objectContaining({ traceId: trace2 })]);
    const delivery = received.find((r) => r.body.callId === "c-noop");
    const header = /^00-([0-9a-f]{32})-([0-9a-f]{16})-(\d\d)$/.exec(
      String(delivery?.headers.traceparent),
    );
    expect(header?.[1]).toBe(trace2);
    // A fresh parent (not the caller's span, which made no request to the receiver), and the
    // caller's sampling decision (not sampled) passed on as it came.
    expect(header?.[2]).not.toBe("8888888888888888");
    expect(header?.[3]).toBe("00");
    // No traceparent at all: still a W3C trace ID, in audit and at the receiver alike.
    await send("bob", "c-noop-fresh");
    const fresh = received.find((r) => r.body.callId === "c-noop-fresh");
    expect(String(fresh?.body.traceId)).toMatch(/^[0-9a-f]{32}$/);
    expect(String(fresh?.headers.traceparent)).toMatch(
      new RegExp(`^00-${String(fresh?.body.traceId)}-[0-9a-f]{16}-00$`),
    );
  });

  it("passes the caller's tracestate on with its trace, unchanged; none without a valid traceparent", async () => {
    const parent = `00-${"7".repeat(32)}-8888888888888888-01`;
    const stateAt = async (callId: string, traceparent: string, tracestate: string) => {
      await send("bob", callId, traceparent, tracestate);
      return received.find((r) => r.body.callId === callId)?.headers.tracestate;
    };
    expect(await stateAt("c-state", parent, "congo=t61rcWkgMzE,\trojo=00f067aa0ba902b7")).toBe(
      "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7",
    );
    // The state belongs to the caller's trace: a broken traceparent (a new trace) drops it.
    expect(
      await stateAt("c-state-orphan", `00-${"0".repeat(32)}-8888888888888888-01`, "congo=1"),
    ).toBeUndefined();
    // What does not parse is not passed on: a bad member, a key twice, over 512 characters.
    expect(await stateAt("c-state-bad", parent, "congo=1,UPPER=2")).toBeUndefined();
    expect(await stateAt("c-state-twice", parent, "congo=1,congo=2")).toBeUndefined();
    expect(
      await stateAt("c-state-long", parent, `congo=${"x".repeat(250)},rojo=${"y".repeat(255)}`),
    ).toBeUndefined();
  });
});

describe("with the host's SDK installed", () => {
  beforeAll(() => {
    expect(trace.setGlobalTracerProvider(provider)).toBe(true);
  });

  describe("a send with the caller's traceparent", () => {
    it("carries one trace ID through audit, the spans and the webhook request", async () => {
      const answer = await send("bob", "c-traced", `00-${TRACE}-${PARENT}-01`);
      expect(answer.body).toMatchObject({ status: "delivered", callId: "c-traced" });

      const events = await auditByTrace(TRACE);
      expect(events).toEqual([
        expect.objectContaining({ callId: "c-traced", outcome: "allowed", traceId: TRACE }),
      ]);

      const delivery = received.find((r) => r.body.callId === "c-traced");
      expect(delivery?.body.traceId).toBe(TRACE);
      const header = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(
        String(delivery?.headers.traceparent),
      );
      expect(header?.[1]).toBe(TRACE);

      const spans = await spansOf(TRACE);
      const request = span(spans, "tessera.send");
      const decide = span(spans, "tessera.decide");
      const write = span(spans, "tessera.store.write");
      const webhook = span(spans, "tessera.webhook");
      expect(request.kind).toBe(SpanKind.SERVER);
      expect(parentOf(request)).toBe(PARENT);
      expect(request.parentSpanContext?.isRemote).toBe(true);
      expect(request.attributes).toEqual({
        "tessera.route": "send",
        "tessera.outcome": "delivered",
        "tessera.call_id": "c-traced",
        "http.response.status_code": 200,
      });
      expect(parentOf(decide)).toBe(idOf(request));
      expect(decide.attributes).toMatchObject({
        "tessera.call_id": "c-traced",
        "tessera.outcome": "delivered",
      });
      // The decision's act and its delivery happen inside the decision.
      expect(parentOf(write)).toBe(idOf(decide));
      expect(write.attributes).toEqual({ "tessera.outcome": "recorded" });
      expect(parentOf(webhook)).toBe(idOf(decide));
      expect(webhook.kind).toBe(SpanKind.CLIENT);
      expect(webhook.attributes).toEqual({ "tessera.outcome": "delivered" });
      // The receiver's parent is the webhook call itself.
      expect(header?.[2]).toBe(idOf(webhook));
      expectNoPayload(spans.values());
    });

    it("refused: the code on the request and decision spans, the act written, nothing delivered", async () => {
      const trace = "0af7651916cd43dd8448eb211c80319c";
      const answer = await send("carol", "c-refused", `00-${trace}-b7ad6b7169203331-01`);
      expect(answer.body).toEqual({ status: "denied", code: "no_matching_grant" });
      expect(await auditByTrace(trace)).toEqual([
        expect.objectContaining({ callId: "c-refused", code: "no_matching_grant", traceId: trace }),
      ]);
      const spans = await spansOf(trace);
      expect([...spans.keys()].sort()).toEqual([
        "tessera.decide",
        "tessera.send",
        "tessera.store.write",
      ]);
      expect(span(spans, "tessera.send").attributes).toMatchObject({
        "tessera.outcome": "denied",
        "tessera.code": "no_matching_grant",
        "http.response.status_code": 200,
      });
      expect(span(spans, "tessera.decide").attributes).toMatchObject({
        "tessera.outcome": "denied",
        "tessera.code": "no_matching_grant",
      });
      expect(parentOf(span(spans, "tessera.store.write"))).toBe(
        idOf(span(spans, "tessera.decide")),
      );
      expect(received.some((r) => r.body.callId === "c-refused")).toBe(false);
      expectNoPayload(spans.values());
    });

    it("a failed delivery: the webhook span says receiver_error, the send delivery_failed", async () => {
      const trace = "11111111111111111111111111111111";
      const answer = await send("dave", "c-down", `00-${trace}-2222222222222222-01`);
      expect(answer.body).toEqual({ status: "denied", code: "delivery_failed" });
      const spans = await spansOf(trace);
      expect(span(spans, "tessera.webhook").attributes).toEqual({
        "tessera.outcome": "failed",
        "tessera.code": "receiver_error",
      });
      expect(span(spans, "tessera.send").attributes).toMatchObject({
        "tessera.outcome": "denied",
        "tessera.code": "delivery_failed",
      });
      const delivery = received.find((r) => r.body.callId === "c-down");
      expect(String(delivery?.headers.traceparent)).toMatch(new RegExp(`^00-${trace}-`));
    });

    it("two requests sharing one traceparent, open at once: each span tree its own", async () => {
      const shared = "99999999999999999999999999999999";
      const header = `00-${shared}-aaaaaaaaaaaaaaaa-01`;
      const answers = await Promise.all([
        send("erin", "c-twin-1", header),
        send("erin", "c-twin-2", header),
      ]);
      expect(answers.map((a) => (a.body as { status: string }).status)).toEqual([
        "delivered",
        "delivered",
      ]);
      await provider.forceFlush();
      const spans = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === shared);
      const named = (name: string) => spans.filter((s) => s.name === name);
      expect(named("tessera.send")).toHaveLength(2);
      for (const callId of ["c-twin-1", "c-twin-2"]) {
        const request = named("tessera.send").find(
          (s) => s.attributes["tessera.call_id"] === callId,
        );
        const decide = named("tessera.decide").find(
          (s) => s.attributes["tessera.call_id"] === callId,
        );
        expect(request && decide && parentOf(decide)).toBe(request && idOf(request));
        // Its own act and its own delivery, under its own decision.
        const under = spans.filter((s) => decide !== undefined && parentOf(s) === idOf(decide));
        expect(under.map((s) => s.name).sort()).toEqual(["tessera.store.write", "tessera.webhook"]);
        const delivery = received.find((r) => r.body.callId === callId);
        const webhook = under.find((s) => s.name === "tessera.webhook");
        expect(String(delivery?.headers.traceparent)).toBe(
          `00-${shared}-${webhook && idOf(webhook)}-01`,
        );
      }
    });

    it("authorize: its own server span, the code of a refusal", async () => {
      const trace = "33333333333333333333333333333333";
      const answer = await call(server.url, "POST", "/v1/authorize", {
        token: alice.token,
        headers: { traceparent: `00-${trace}-4444444444444444-01` },
        body: { action: "files.read", resource: { namespace: "files", path: ["x"] } },
      });
      expect(answer.body).toMatchObject({ status: "denied" });
      const request = span(await spansOf(trace), "tessera.authorize");
      expect(request.attributes).toMatchObject({
        "tessera.route": "authorize",
        "tessera.outcome": "denied",
        "tessera.code": (answer.body as { code: string }).code,
      });
      expect((await auditByTrace(trace))[0]).toMatchObject({ traceId: trace });
    });
  });

  describe("a send without a usable traceparent", () => {
    it.each([
      ["none", undefined],
      ["malformed", "00-not-a-trace-01"],
      ["an all-zero trace ID", `00-${"0".repeat(32)}-${PARENT}-01`],
      ["a repeated header", `00-${TRACE}-${PARENT}-01, 00-${TRACE}-${PARENT}-01`],
    ])("%s: a fresh W3C trace, the same in audit, spans and webhook", async (_label, header) => {
      const callId = `c-fresh-${received.length}`;
      const answer = await send("bob", callId, header);
      expect(answer.status).toBe(200);
      expect(answer.body).toMatchObject({ status: "delivered" });
      const delivery = received.find((r) => r.body.callId === callId);
      const traceId = String(delivery?.body.traceId);
      expect(traceId).toMatch(/^[0-9a-f]{32}$/);
      expect(traceId).not.toBe(TRACE);
      expect(String(delivery?.headers.traceparent)).toMatch(new RegExp(`^00-${traceId}-`));
      expect(await auditByTrace(traceId)).toEqual([expect.objectContaining({ callId, traceId })]);
      const spans = await spansOf(traceId);
      const request = span(spans, "tessera.send");
      // A root span: the trace is the service's own.
      expect(request.parentSpanContext).toBeUndefined();
      expect(parentOf(span(spans, "tessera.webhook"))).toBe(idOf(span(spans, "tessera.decide")));
    });
  });

  describe("A2UI one-step calls", () => {
    it("carry the caller's trace on the kernel's and the gate's events and to the function endpoint", async () => {
      const trace = "55555555555555555555555555555555";
      const answer = await call(server.url, "POST", "/v1/a2ui/call", {
        token: alice.token,
        headers: { traceparent: `00-${trace}-6666666666666666-01`, tracestate: "rojo=fx" },
        body: { message: a2uiCall("fx-traced") },
      });
      expect(answer.body).toMatchObject({ receipt: "dispatched" });
      const events = await auditByTrace(trace);
      expect(events.map((e) => [e.source, e.callId])).toEqual([
        ["kernel", "fx-traced"],
        ["gate", "fx-traced"],
      ]);
      const spans = await spansOf(trace);
      const request = span(spans, "tessera.a2ui.call");
      expect(parentOf(request)).toBe("6666666666666666");
      expect(request.attributes).toMatchObject({
        "tessera.route": "a2ui.call",
        "tessera.outcome": "dispatched",
        "tessera.call_id": "fx-traced",
      });
      const decide = span(spans, "tessera.decide");
      expect(parentOf(decide)).toBe(idOf(request));
      expect(decide.attributes).toEqual({
        "tessera.call_id": "fx-traced",
        "tessera.outcome": "allowed",
      });
      // The kernel's act (claim and decision) under the decision; the gate's own event is
      // written after the reply, without a span.
      expect(parentOf(span(spans, "tessera.store.write"))).toBe(idOf(decide));
      expect(spans.size).toBe(4);
      // The function runs once the decision is made: under the request, not the decision.
      const fn = span(spans, "tessera.a2ui.function");
      expect(parentOf(fn)).toBe(idOf(request));
      const endpoint = received.find(
        (r) => r.url === "/fn" && r.body.functionCallId === "fx-traced",
      );
      expect(String(endpoint?.headers.traceparent)).toBe(`00-${trace}-${idOf(fn)}-01`);
      expect(endpoint?.headers.tracestate).toBe("rojo=fx");
      expect(fn.spanContext().traceState?.get("rojo")).toBe("fx");
    });
  });
});
