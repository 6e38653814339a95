import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { messageSendCapability, openStores, type StoreBundle } from "@tessera/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen, type RunningServer } from "../src/listen.js";
import { call, principal } from "./support/service.js";

/**
 * One JSON line per decision (call ID, principal, action, resource, outcome, code, reason,
 * trace ID, latency), an allow and a denial told apart, a failed delivery logged, probes at
 * debug, and never the payload or the token.
 */
const alice = principal("decision-log-token-0123456789", {
  namespaceId: "team",
  actor: "alice",
  authority: "host",
  owner: "o",
});
const PAYLOAD = "TOP-SECRET-PAYLOAD-42";
type Line = Record<string, unknown> & { level: number; msg: string };
const lines: Line[] = [];
let stores: StoreBundle;
let server: RunningServer;

/**
 * Deliveries to erin wait until two are in flight: both requests have then decided (their acts
 * recorded, their events seen) while both are still open, so their lines can only be told
 * apart by call ID, never by order.
 */
const atErin: (() => void)[] = [];
const bothAtErin = () =>
  new Promise<void>((resolve) => {
    atErin.push(resolve);
    if (atErin.length === 2) for (const release of atErin.splice(0)) release();
  });

beforeAll(async () => {
  stores = await openStores(`sqlite:${join(mkdtempSync(join(tmpdir(), "decision-log-")), "t.db")}`);
  for (const to of ["bob", "dave"]) {
    await stores.grants.add({
      id: `ticket-${to}`,
      namespaceId: "team",
      issuer: "host",
      subject: "alice",
      capabilities: [messageSendCapability(to, "o")],
      constraints: { maxUses: 1 },
      issuedAt: "2020-01-01T00:00:00.000Z",
    });
  }
  await stores.grants.add({
    id: "ticket-erin",
    namespaceId: "team",
    issuer: "host",
    subject: "alice",
    capabilities: [messageSendCapability("erin", "o")],
    constraints: { maxUses: 10 },
    issuedAt: "2020-01-01T00:00:00.000Z",
  });
  server = await listen({
    stores,
    principals: [alice.config],
    port: 0,
    transport: {
      deliver: async (envelope) => {
        if (envelope.recipient === "erin") await bothAtErin();
        return envelope.recipient === "dave"
          ? { status: "failed", code: "unreachable" }
          : { status: "delivered", reply: { ok: true } };
      },
    },
    log: { level: "debug", stream: { write: (line) => lines.push(JSON.parse(line) as Line) } },
  });
});

afterAll(async () => {
  await server?.close();
  await stores?.close();
});

const send = (to: string, callId: string) =>
  call(server.url, "POST", "/v1/messages", {
    token: alice.token,
    body: { recipient: to, payload: { text: PAYLOAD }, callId },
  });

/** The explain route writes what waits after earlier replies (denial events) before reading. */
const settled = (callId: string) =>
  call(server.url, "GET", `/v1/explain?callId=${callId}`, { token: alice.token });

const decisionsOf = (callId: string) =>
  lines.filter((line) => line.msg === "decision" && line.callId === callId);

describe("decision log lines", () => {
  it("write an allow with every field, once, and a replay as replayed", async () => {
    expect((await send("bob", "c-allow")).body).toMatchObject({ status: "delivered" });
    expect((await send("bob", "c-allow")).body).toMatchObject({ status: "delivered" });
    await settled("c-allow");
    const [allowed, replayed, ...more] = decisionsOf("c-allow");
    expect(more).toEqual([]);
    expect(allowed).toMatchObject({
      level: 30,
      reqId: expect.any(String),
      source: "kernel",
      principal: { namespaceId: "team", actor: "alice", authority: "host", owner: "o" },
      action: "messages.send",
      resource: "messages:/bob",
      outcome: "allowed",
      code: null,
      reason: "allowed",
      // No traceparent: a fresh W3C trace ID.
      traceId: expect.stringMatching(/^[0-9a-f]{32}$/),
      grantId: "ticket-bob",
      latencyMs: expect.any(Number),
    });
    expect(replayed).toMatchObject({ outcome: "replayed", route: "send", level: 30 });
  });

  it("tell a denial from an allow by outcome, code and reason", async () => {
    expect((await send("carol", "c-deny")).body).toEqual({
      status: "denied",
      code: "no_matching_grant",
    });
    await settled("c-deny");
    expect(decisionsOf("c-deny")).toEqual([
      expect.objectContaining({
        outcome: "denied",
        code: "no_matching_grant",
        reason: "no_capability",
        resource: "messages:/carol",
        latencyMs: expect.any(Number),
      }),
    ]);
  });

  it("log a failed webhook delivery with the transport's code", async () => {
    expect((await send("dave", "c-fail")).body).toEqual({
      status: "denied",
      code: "delivery_failed",
    });
    await settled("c-fail");
    const failed = decisionsOf("c-fail").find((line) => line.code === "delivery_failed");
    expect(failed).toMatchObject({ outcome: "denied", resource: "messages:/dave" });
    expect(JSON.stringify(failed)).toContain("unreachable");
  });

  it("keep apart concurrent requests that share one traceparent: one line each, its own", async () => {
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const traceparent = `00-${traceId}-00f067aa0ba902b7-01`;
    const sendAs = (reqId: string, to: string, callId?: string) =>
      call(server.url, "POST", "/v1/messages", {
        token: alice.token,
        headers: { traceparent, "x-request-id": reqId },
        body: {
          recipient: to,
          payload: { text: PAYLOAD },
          ...(callId === undefined ? {} : { callId }),
        },
      });
    const answers = await Promise.all([
      sendAs("req-tp-1", "erin", "c-tp-1"),
      sendAs("req-tp-2", "erin", "c-tp-2"),
      sendAs("req-tp-3", "carol", "c-tp-3"),
      // No call ID: a denial written after its reply, still found by its own request.
      sendAs("req-tp-4", "carol"),
    ]);
    expect(answers.map((a) => (a.body as { status: string }).status)).toEqual([
      "delivered",
      "delivered",
      "denied",
      "denied",
    ]);
    await settled("c-tp-1");
    const shared = lines.filter((line) => line.msg === "decision" && line.traceId === traceId);
    expect(shared).toHaveLength(4);
    const byReq = new Map(shared.map((line) => [line.reqId, line]));
    expect(byReq.get("req-tp-1")).toMatchObject({ callId: "c-tp-1", outcome: "allowed" });
    expect(byReq.get("req-tp-2")).toMatchObject({ callId: "c-tp-2", outcome: "allowed" });
    expect(byReq.get("req-tp-3")).toMatchObject({ callId: "c-tp-3", outcome: "denied" });
    expect(byReq.get("req-tp-4")).toMatchObject({ outcome: "denied", code: "no_matching_grant" });
    for (const line of shared) expect(line.latencyMs).toEqual(expect.any(Number));
  });

  it("put probes and a decision route's request line at debug, other requests at info", async () => {
    await fetch(`${server.url}/healthz`);
    await call(server.url, "GET", "/v1/tools", { token: alice.token });
    const request = (url: string) =>
      lines.filter((l) => l.msg === "request" && (l.req as { url: string }).url === url);
    expect(request("/healthz").map((l) => l.level)).toEqual([20]);
    expect(request("/v1/tools").map((l) => l.level)).toEqual([30]);
    expect(request("/v1/messages").every((l) => l.level === 20)).toBe(true);
    // Fastify's own two lines per request are gone.
    expect(lines.some((l) => l.msg === "incoming request" || l.msg === "request completed")).toBe(
      false,
    );
  });

  it("never write a payload or a token", () => {
    const text = JSON.stringify(lines);
    expect(text).not.toContain(PAYLOAD);
    expect(text).not.toContain(alice.token);
  });
});
