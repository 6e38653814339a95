import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openStores, type StoreBundle } from "@tessera/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen, type RunningServer } from "../src/listen.js";
import { call, principal } from "./support/service.js";

/** Structured JSON logs: request IDs, the token never written, the cause of a 5xx written. */
const alice = principal("secret-token-value-123", {
  namespaceId: "team",
  actor: "a",
  authority: "host",
});
const lines: Record<string, unknown>[] = [];
/** The lines as written: JSON.parse keeps the last of a key written twice, the text shows both. */
const written: string[] = [];
let stores: StoreBundle;
let server: RunningServer;

beforeAll(async () => {
  stores = await openStores(`sqlite:${join(mkdtempSync(join(tmpdir(), "logs-")), "t.db")}`);
  const broken = {
    ...stores,
    audit: {
      read: async () => {
        throw new RangeError("audit reader bug #7");
      },
      append: stores.audit.append.bind(stores.audit),
    },
  };
  server = await listen({
    stores: broken,
    principals: [alice.config],
    port: 0,
    log: {
      level: "info",
      stream: {
        write: (line) => {
          written.push(line);
          lines.push(JSON.parse(line));
        },
      },
    },
  });
});

afterAll(async () => {
  await server?.close();
  await stores?.close();
});

describe("logs", () => {
  it("write one line per request, with its request ID and no header (so no token)", async () => {
    await call(server.url, "GET", "/v1/tools", { token: alice.token });
    const text = JSON.stringify(lines);
    expect(text).not.toContain(alice.token);
    const mine = lines.filter((l) => (l.req as { url?: string } | undefined)?.url === "/v1/tools");
    expect(mine).toEqual([
      expect.objectContaining({
        msg: "request",
        req: { method: "GET", url: "/v1/tools" },
        res: { statusCode: 200 },
        reqId: expect.stringMatching(/^[0-9a-f-]{36}$/),
        actor: "a",
      }),
    ]);
    // Each key once per line (the request's logger binds reqId; the line must not add it again).
    const twice = written.filter((line) => line.split('"reqId":').length > 2);
    expect(twice).toEqual([]);
  });

  it("echo a sane x-request-id in the answer and the log lines; replace any other", async () => {
    const sent = await fetch(`${server.url}/v1/tools`, {
      headers: { authorization: `Bearer ${alice.token}`, "x-request-id": "host-req.42:a_b-c" },
    });
    expect(sent.headers.get("x-request-id")).toBe("host-req.42:a_b-c");
    expect(lines.filter((l) => l.reqId === "host-req.42:a_b-c").length).toBeGreaterThanOrEqual(1);

    for (const hostile of ["a b", "x".repeat(129), "id\u00e9", "<script>"]) {
      const answer = await fetch(`${server.url}/v1/tools`, {
        headers: { authorization: `Bearer ${alice.token}`, "x-request-id": encodeURI(hostile) },
      });
      const id = answer.headers.get("x-request-id");
      if (encodeURI(hostile) === hostile) expect(id).not.toBe(hostile);
      expect(id).toMatch(/^[0-9a-f-]{36}$/);
    }
    // Without one, each answer carries a fresh ID; refusals and unknown routes too.
    const none = await fetch(`${server.url}/v1/tools`);
    expect(none.status).toBe(401);
    expect(none.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    const missing = await fetch(`${server.url}/v1/nowhere`, {
      headers: { "x-request-id": "lost-1" },
    });
    expect(missing.status).toBe(404);
    expect(missing.headers.get("x-request-id")).toBe("lost-1");
  });

  it("write the cause of a 5xx, and answer it without the cause", async () => {
    const answer = await call(server.url, "GET", "/v1/explain?callId=x", { token: alice.token });
    expect(answer).toMatchObject({ status: 500, body: { error: { code: "internal_error" } } });
    expect(JSON.stringify(answer.body)).not.toContain("bug #7");
    const failed = lines.find((l) => l.msg === "request failed");
    expect(JSON.stringify(failed)).toContain("audit reader bug #7");
  });
});
