import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openStores } from "@tessera/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen } from "../src/listen.js";
import {
  authorize,
  call,
  principal,
  rawRequest,
  replacingMethod,
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
    // So does the tool list: an outage is not "nothing granted".
    const tools = await call(down.server.url, "GET", "/v1/tools", { token: alice.token });
    expect(tools).toMatchObject({ status: 503, body: { error: { code: "unavailable" } } });
  });

  it("answers concurrent readiness probes with one store probe's verdict", async () => {
    const replies = await Promise.all(
      Array.from({ length: 20 }, () => rawRequest(down.server.url, "/readyz")),
    );
    expect(new Set(replies.map((r) => r.status))).toEqual(new Set([503]));
  });
});

describe("readiness after the audit sink failed a denial written after its reply", () => {
  let dir: string;
  let stores: Awaited<ReturnType<typeof openStores>>;
  let server: Awaited<ReturnType<typeof listen>>;
  let down = false;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "tessera-ready-"));
    stores = await openStores(`sqlite:${join(dir, "t.db")}`);
    const audit = replacingMethod(stores.audit, "append", (event, options) => {
      if (down) return Promise.reject(new Error("disk full"));
      return stores.audit.append(event, options);
    });
    server = await listen({
      stores: { ...stores, audit },
      principals: [alice.config],
      port: 0,
      log: false,
    });
  });

  afterAll(async () => {
    await server?.close();
    await stores?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("is not ready while the event is kept, and ready again with no request once it is written", async () => {
    down = true;
    // A refusal without a call ID: answered first, its event refused by the sink afterwards.
    const refused = await authorize(server.url, alice.token, {
      action: "message.send",
      resource: { namespace: "agents", path: ["stranger"] },
    });
    expect(refused.status).toBe(200);
    await waitFor(async () => (await rawRequest(server.url, "/readyz")).status === 503);
    down = false;
    // No refusal arrives (an instance out of rotation gets none): the kernel's retry writes the
    // kept event, and readiness turns back by itself.
    await waitFor(async () => (await rawRequest(server.url, "/readyz")).status === 200);
    const events = await stores.audit.read({});
    expect(
      events.filter((e) => e.outcome === "denied" && e.reason === "no_capability"),
    ).toHaveLength(1);
  });
});

async function waitFor(condition: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error("timed out waiting for readiness to change");
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

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
