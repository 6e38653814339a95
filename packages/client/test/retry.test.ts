import { afterEach, describe, expect, it } from "vitest";
import { createTesseraClient, isTesseraClientError } from "../src/index.js";
import { backoffMs, parseRetryAfter, resolveRetry } from "../src/retry.js";
import { clientErrorOf, drop, json, stubService } from "./stub.js";

const fast = { attempts: 3, baseDelayMs: 5, maxDelayMs: 20 };
const unavailable = json(503, { error: { code: "grant_store_unavailable", message: "down" } });
const delivered = {
  status: "delivered",
  messageId: "m-1",
  grantId: "g-1",
  callId: "c-1",
  reply: { ok: true },
};

let stub: Awaited<ReturnType<typeof stubService>> | undefined;
afterEach(async () => {
  await stub?.close();
  stub = undefined;
});

describe("retries on a flaky service", () => {
  it("retries a read after 503 and a dropped connection, then answers", async () => {
    stub = await stubService([unavailable, drop, json(200, { tools: ["send_message"] })]);
    const client = createTesseraClient({ url: stub.url, token: "t", retry: fast });
    await expect(client.tools()).resolves.toEqual({ tools: ["send_message"] });
    expect(stub.seen).toHaveLength(3);
    expect(stub.seen.every((r) => r.authorization === "Bearer t")).toBe(true);
  });

  it("retries a send with the same call ID, so the service answers the original", async () => {
    stub = await stubService([drop, json(200, delivered)]);
    const client = createTesseraClient({ url: stub.url, token: "t", retry: fast });
    const answer = await client.sendMessage({ recipient: "bob", payload: { q: 1 } });
    expect(answer).toEqual(delivered);
    const [first, second] = stub.seen.map((r) => JSON.parse(r.body) as { callId: string });
    // A call ID was made up for the caller and sent both times: the retry is the same call.
    expect(first?.callId).toMatch(/^[0-9a-f-]{36}$/);
    expect(second?.callId).toBe(first?.callId);
  });

  it("keeps the caller's own call ID across retries", async () => {
    stub = await stubService([unavailable, json(200, delivered)]);
    const client = createTesseraClient({ url: stub.url, token: "t", retry: fast });
    await client.sendMessage({ recipient: "bob", payload: 1, callId: "c-1" });
    expect(stub.seen.map((r) => JSON.parse(r.body).callId)).toEqual(["c-1", "c-1"]);
  });

  it("never retries a call whose repeat is not the original (A2UI claim, grant changes)", async () => {
    stub = await stubService([unavailable, json(200, { revoked: true })]);
    const client = createTesseraClient({ url: stub.url, token: "t", retry: fast });
    const error = await clientErrorOf(client.revokeGrant("g-1"));
    expect(error).toMatchObject({ code: "grant_store_unavailable", status: 503, attempts: 1 });
    expect(stub.seen).toHaveLength(1);
    await clientErrorOf(client.a2uiClaim({ message: {} }));
    expect(stub.seen).toHaveLength(2);
  });

  it("asks again while the first request of its call ID is still running", async () => {
    stub = await stubService([
      json(409, {
        error: { code: "call_in_progress", message: "the first request has not answered" },
      }),
      json(200, delivered),
    ]);
    const client = createTesseraClient({ url: stub.url, token: "t", retry: fast });
    await expect(
      client.sendMessage({ recipient: "bob", payload: 1, callId: "c-1" }),
    ).resolves.toEqual(delivered);
    expect(stub.seen).toHaveLength(2);
  });

  it("never retries a conflict: the call ID was used with another body", async () => {
    stub = await stubService([
      json(409, { error: { code: "call_id_conflict", message: "another body" } }),
      json(200, delivered),
    ]);
    const client = createTesseraClient({ url: stub.url, token: "t", retry: fast });
    const error = await clientErrorOf(
      client.sendMessage({ recipient: "bob", payload: 1, callId: "c-1" }),
    );
    expect(error).toMatchObject({ code: "call_id_conflict", status: 409, attempts: 1 });
  });

  it("gives up after the configured attempts with the last error", async () => {
    stub = await stubService([unavailable]);
    const client = createTesseraClient({ url: stub.url, token: "t", retry: fast });
    const error = await clientErrorOf(client.tools());
    expect(error).toMatchObject({ code: "grant_store_unavailable", status: 503, attempts: 3 });
    expect(stub.seen).toHaveLength(3);
  });

  it("does not retry a 4xx: no decision was taken and the same request gets the same answer", async () => {
    stub = await stubService([
      json(400, {
        error: { code: "invalid_request", message: "recipient: too long", field: "recipient" },
      }),
    ]);
    const client = createTesseraClient({ url: stub.url, token: "t", retry: fast });
    const error = await clientErrorOf(client.sendMessage({ recipient: "x", payload: 1 }));
    expect(error).toMatchObject({ code: "invalid_request", status: 400, field: "recipient" });
    expect(stub.seen).toHaveLength(1);
  });

  it("with attempts 1, sends no made-up call ID and tries once", async () => {
    stub = await stubService([unavailable]);
    const client = createTesseraClient({ url: stub.url, token: "t", retry: { attempts: 1 } });
    await clientErrorOf(client.sendMessage({ recipient: "bob", payload: 1 }));
    expect(stub.seen).toHaveLength(1);
    expect(JSON.parse(stub.seen[0]?.body ?? "{}")).not.toHaveProperty("callId");
  });
});

describe("typed errors", () => {
  it("a refused connection is service_unreachable after the retries", async () => {
    stub = await stubService([]);
    const url = stub.url;
    await stub.close();
    stub = undefined;
    const client = createTesseraClient({ url, retry: fast });
    const error = await clientErrorOf(client.health());
    expect(error).toMatchObject({ code: "service_unreachable", attempts: 3, status: undefined });
    expect(error.message).toContain("connection refused");
  });

  it("a 200 body that is not the route's documented shape is invalid_response, never returned", async () => {
    stub = await stubService([json(200, { status: "delivered", messageId: 7 })]);
    const client = createTesseraClient({ url: stub.url, token: "t", retry: fast });
    const error = await clientErrorOf(client.sendMessage({ recipient: "bob", payload: 1 }));
    expect(error).toMatchObject({ code: "invalid_response", status: 200 });
    expect(stub.seen).toHaveLength(1);
  });

  it("an answer without a Tessera error body keeps its status", async () => {
    stub = await stubService([
      (_, response) => {
        response.writeHead(404, { "content-type": "text/html" });
        response.end("<h1>nope</h1>");
      },
    ]);
    const client = createTesseraClient({ url: stub.url, retry: fast });
    const error = await clientErrorOf(client.health());
    expect(error).toMatchObject({ code: "invalid_response", status: 404 });
  });

  it("a slow service is service_unreachable after its timeout", async () => {
    stub = await stubService([() => {}]);
    const client = createTesseraClient({ url: stub.url, timeoutMs: 50, retry: { attempts: 1 } });
    const error = await clientErrorOf(client.health());
    expect(error).toMatchObject({ code: "service_unreachable" });
    expect(error.message).toContain("within 50 ms");
  });

  it("carries the service's request ID and serialises without the cause", async () => {
    stub = await stubService([
      json(
        401,
        { error: { code: "unauthenticated", message: "a known bearer token is required" } },
        {
          "x-request-id": "req-9",
        },
      ),
    ]);
    const error = await clientErrorOf(createTesseraClient({ url: stub.url }).tools());
    expect(isTesseraClientError(error, "unauthenticated")).toBe(true);
    expect(JSON.parse(JSON.stringify(error))).toEqual({
      code: "unauthenticated",
      message: "a known bearer token is required",
      status: 401,
      requestId: "req-9",
    });
  });

  it("the caller's abort is thrown as is and stops the retries", async () => {
    stub = await stubService([unavailable]);
    const client = createTesseraClient({ url: stub.url, retry: { attempts: 5, baseDelayMs: 200 } });
    const controller = new AbortController();
    const pending = client.tools({ signal: controller.signal });
    setTimeout(() => controller.abort(new Error("enough")), 50);
    await expect(pending).rejects.toThrow("enough");
    expect(stub.seen.length).toBeLessThan(5);
  });

  it("builds query strings and path parameters with encoding", async () => {
    stub = await stubService([
      json(200, { callId: "a b/c", verdict: "unknown", code: null, summary: "s" }),
      json(200, { revoked: true }),
    ]);
    const client = createTesseraClient({ url: `${stub.url}/`, token: "t" });
    await client.explain("a b/c");
    await client.revokeGrant("g/1 x");
    expect(stub.seen.map((r) => `${r.method} ${r.url}`)).toEqual([
      "GET /v1/explain?callId=a+b%2Fc",
      "DELETE /v1/grants/g%2F1%20x",
    ]);
  });
});

describe("backoff", () => {
  it("grows exponentially under the cap, with jitter, and honours Retry-After up to the cap", () => {
    const policy = resolveRetry({ attempts: 5, baseDelayMs: 100, maxDelayMs: 1000 });
    expect([0, 1, 2, 3, 4].map((n) => backoffMs(policy, n, undefined, () => 0.999))).toEqual([
      99, 199, 399, 799, 999,
    ]);
    expect(backoffMs(policy, 0, undefined, () => 0)).toBe(0);
    expect(backoffMs(policy, 0, 500, () => 0)).toBe(500);
    expect(backoffMs(policy, 0, 60_000, () => 0)).toBe(1000);
    expect(parseRetryAfter("2")).toBe(2000);
    expect(parseRetryAfter(new Date(10_000).toUTCString(), 7_000)).toBe(3000);
    expect(parseRetryAfter("soon")).toBeUndefined();
    for (const policy of [
      { attempts: 0 },
      { attempts: Number.NaN },
      { baseDelayMs: -1 },
      { maxDelayMs: Number.POSITIVE_INFINITY },
      { maxDelayMs: 2 ** 31 },
    ]) {
      expect(() => resolveRetry(policy), JSON.stringify(policy)).toThrow(
        expect.objectContaining({ code: "invalid_config" }),
      );
    }
  });

  it("takes any number of attempts up to 2^31 − 1, each late wait capped (as the Python client)", () => {
    // 2 ** retry is Infinity from the 1024th retry: the cap holds. With a base of 0 the wait
    // was NaN (0 · Infinity), which setTimeout runs at once, a Retry-After ignored.
    const policy = resolveRetry({ attempts: 2 ** 31 - 1, baseDelayMs: 100, maxDelayMs: 1000 });
    for (const retry of [1023, 1024, 5000, 2 ** 31 - 2]) {
      expect(backoffMs(policy, retry, undefined, () => 0.5)).toBe(500);
      expect(backoffMs(policy, retry, 60_000, () => 0)).toBe(1000);
    }
    const noBase = resolveRetry({ attempts: 2 ** 31 - 1, baseDelayMs: 0, maxDelayMs: 1000 });
    for (const retry of [10, 1024, 5000]) {
      expect(backoffMs(noBase, retry, undefined, () => 0.5)).toBe(0);
      expect(backoffMs(noBase, retry, 500, () => 0.5)).toBe(500);
    }
  });

  it("waits Retry-After before retrying a 503", async () => {
    stub = await stubService([
      json(503, { error: { code: "audit_unavailable", message: "down" } }, { "retry-after": "1" }),
      json(200, { ok: true }),
    ]);
    const client = createTesseraClient({
      url: stub.url,
      retry: { attempts: 2, baseDelayMs: 1, maxDelayMs: 300 },
    });
    const started = Date.now();
    await client.health();
    // Retry-After says 1 s, the cap says 300 ms: the cap wins, and the wait is not skipped.
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
  });
});
