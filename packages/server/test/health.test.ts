import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  authorize,
  principal,
  rawRequest,
  type Service,
  send,
  startService,
  ticket,
} from "./support/service.js";

const alice = principal("token-alice", {
  namespaceId: "team",
  actor: "asker",
  authority: "host",
  owner: "alice",
});

describe("liveness and readiness (item 11)", () => {
  let up: Service;
  let down: Service;

  beforeAll(async () => {
    up = await startService([alice.config], [ticket("t-up", "colleague-0")]);
    // A service whose store is gone: every port refuses, as after an outage.
    down = await startService([alice.config], [ticket("t-down", "colleague-0")]);
    await down.stores.close();
  });

  afterAll(async () => {
    await up?.close();
    await down?.server.close();
  });

  it("is ready, and says so without a token, while its store answers", async () => {
    expect(await rawRequest(up.server.url, "/healthz")).toEqual({
      status: 200,
      body: { ok: true },
    });
    expect(await rawRequest(up.server.url, "/readyz")).toEqual({
      status: 200,
      body: { ready: true },
    });
  });

  it("stays live but answers not ready (503) when the store is gone", async () => {
    expect((await rawRequest(down.server.url, "/healthz")).status).toBe(200);
    const ready = await rawRequest(down.server.url, "/readyz");
    expect(ready).toEqual({
      status: 503,
      body: { error: { code: "unavailable", message: expect.any(String) } },
    });
    // And the readiness answer is the truth: decisions do fail.
    const decision = await authorize(down.server.url, alice.token, send("colleague-0", "c-down"));
    expect(decision.status).toBe(503);
  });

  it("answers concurrent readiness probes with one store probe's verdict", async () => {
    const replies = await Promise.all(
      Array.from({ length: 20 }, () => rawRequest(down.server.url, "/readyz")),
    );
    expect(new Set(replies.map((r) => r.status))).toEqual(new Set([503]));
  });
});

describe("malformed request targets never reach the store (item 11)", () => {
  let service: Service;

  beforeAll(async () => {
    service = await startService([alice.config]);
    // Closed on purpose: an answer that touched the store would be a 503.
    await service.stores.close();
  });

  afterAll(async () => {
    await service?.server.close();
  });

  it.each(["//", "//v1/explain?callId=x", "///healthz", "/v1//explain"])(
    "answers %j with 404, token or not",
    async (target) => {
      expect((await rawRequest(service.server.url, target)).status).toBe(404);
      expect((await rawRequest(service.server.url, target, alice.token)).status).toBe(404);
    },
  );

  it.each(["*", "http://[bad/healthz", "ftp://service/healthz"])(
    "answers %j (no path in it) with 400",
    async (target) => {
      const reply = await rawRequest(service.server.url, target);
      expect(reply).toEqual({
        status: 400,
        body: { error: { code: "invalid_request", message: expect.any(String) } },
      });
    },
  );

  it("reads the path of an absolute-form target, as HTTP/1.1 requires", async () => {
    expect((await rawRequest(service.server.url, "http://service/healthz")).status).toBe(200);
    expect((await rawRequest(service.server.url, "http://service//")).status).toBe(404);
  });

  it("still asks for a token on known routes before touching the store", async () => {
    expect((await rawRequest(service.server.url, "/v1/explain?callId=x")).status).toBe(401);
  });
});
