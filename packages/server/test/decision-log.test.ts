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
  server = await listen({
    stores,
    principals: [alice.config],
    port: 0,
    transport: {
      deliver: async (envelope) =>
        envelope.recipient === "dave"
          ? { status: "failed", code: "unreachable" }
          : { status: "delivered", reply: { ok: true } },
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
      traceId: expect.stringMatching(/^[0-9a-f-]{36}$/),
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
