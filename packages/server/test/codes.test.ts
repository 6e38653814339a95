import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ERROR_CATALOG, openStores, type StoreBundle } from "@tessera/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen, type RunningServer } from "../src/listen.js";
import { type Answer, call, principal, replacingMethod, send, ticket } from "./support/service.js";

/**
 * Every error body the service answers carries a code of the one vocabulary, with the HTTP
 * status of that code's row in `ERROR_CATALOG` (docs/codes.md shows the same rows): a client
 * or a host reading either never sees the two disagree.
 */
const agent = principal("token-agent", { namespaceId: "team", actor: "asker", authority: "host" });
const issuer = principal("token-issuer", {
  namespaceId: "team",
  actor: "issuer",
  authority: "host",
  role: "issuer",
});

let stores: StoreBundle;
let server: RunningServer;
let failing: RunningServer;

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), "codes-"));
  stores = await openStores(`sqlite:${join(dir, "t.db")}`);
  await stores.grants.add(ticket("t-1", "colleague-1"));
  server = await listen({ stores, principals: [agent.config, issuer.config], port: 0, log: false });
  // An audit port that throws what no store should (a plain Error): the service's own fault.
  const broken = replacingMethod(stores.audit, "read", async () => {
    throw new Error("boom");
  });
  failing = await listen({
    stores: { ...stores, audit: broken },
    principals: [agent.config],
    port: 0,
    log: false,
  });
});

afterAll(async () => {
  await failing?.close();
  await server?.close();
  await stores?.close();
});

function expectCatalogued(answer: Answer, code: string): void {
  expect(answer.body?.error?.code).toBe(code);
  const entry = (ERROR_CATALOG as Record<string, { httpStatus: number } | undefined>)[code];
  expect(entry, `${code} is not in ERROR_CATALOG`).toBeDefined();
  expect(answer.status).toBe(entry?.httpStatus);
}

describe("the service's error codes are the catalogue's rows", () => {
  it.each([
    ["unauthenticated", () => call(server.url, "POST", "/v1/authorize", { body: {} })],
    ["forbidden", () => call(server.url, "GET", "/v1/grants", { token: agent.token })],
    ["not_found", () => call(server.url, "GET", "/v1/nope")],
    ["method_not_allowed", () => call(server.url, "GET", "/v1/messages")],
    [
      "body_too_large",
      () =>
        call(server.url, "POST", "/v1/messages", {
          token: agent.token,
          raw: JSON.stringify({ recipient: "c", payload: "x".repeat(70 * 1024) }),
        }),
    ],
    [
      "unsupported_media_type",
      () =>
        call(server.url, "POST", "/v1/messages", {
          token: agent.token,
          raw: "recipient=c",
          headers: { "content-type": "text/plain" },
        }),
    ],
    [
      "invalid_request",
      () => call(server.url, "POST", "/v1/messages", { token: agent.token, raw: "{" }),
    ],
    [
      "internal_error",
      () =>
        call(failing.url, "GET", "/v1/audit?callId=c-1", {
          token: agent.token,
        }),
    ],
  ] as const)("%s", async (code, request) => {
    expectCatalogued(await request(), code);
  });

  it("call_id_conflict", async () => {
    const first = await call(server.url, "POST", "/v1/authorize", {
      token: agent.token,
      body: send("colleague-1", "conflict-1"),
    });
    expect(first.status).toBe(200);
    const other = await call(server.url, "POST", "/v1/authorize", {
      token: agent.token,
      body: send("colleague-2", "conflict-1"),
    });
    expectCatalogued(other, "call_id_conflict");
  });

  it("unavailable, once the store is gone", async () => {
    const dir = mkdtempSync(join(tmpdir(), "codes-gone-"));
    const gone = await openStores(`sqlite:${join(dir, "t.db")}`);
    const running = await listen({
      stores: gone,
      principals: [agent.config],
      port: 0,
      log: false,
    });
    try {
      await gone.close();
      const answer = await call(running.url, "POST", "/v1/authorize", {
        token: agent.token,
        body: send("colleague-1", "gone-1"),
      });
      expectCatalogued(answer, "unavailable");
    } finally {
      await running.close();
    }
  });
});
