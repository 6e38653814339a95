import { ROUTES } from "@tessera/core/http";
import { describe, expect, it } from "vitest";
import { createTesseraClient, TesseraClientError } from "../src/index.js";

/**
 * An ID that goes in a URL and is not a string (a JavaScript caller, or TypeScript through
 * `any`) was coerced: `revokeGrant(5)` sent `DELETE /v1/grants/5`, `explain(null)` asked about
 * the call "null", and `revokeGrant(undefined)` sent `DELETE /v1/grants/`, another route. The
 * client refuses it now, as the Python client does (`_sendable`), before any request is made.
 */

const fast = { attempts: 3, baseDelayMs: 5, maxDelayMs: 20 };

/** A fetch that counts its calls and answers each with `answer`. */
function countingFetch(answer: unknown) {
  const urls: string[] = [];
  const bodies: (string | undefined)[] = [];
  const fetch = (async (input: string | URL | Request, init?: RequestInit) => {
    urls.push(String(input));
    bodies.push(typeof init?.body === "string" ? init.body : undefined);
    return new Response(JSON.stringify(answer), {
      status: 200,
      headers: { "content-type": "application/json" },
    });
  }) as typeof globalThis.fetch;
  return { fetch, urls, bodies };
}

async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => undefined,
    (e: unknown) => e,
  );
}

// What an untyped caller passes: the methods' types do not let TypeScript do it.
type Loose = {
  [K in "revokeGrant" | "explain" | "audit"]: (...args: unknown[]) => Promise<unknown>;
};

describe("an ID for a URL that is not a string", () => {
  const cases: [string, string, (client: Loose) => Promise<unknown>][] = [
    ["revokeGrant(5)", "grantId", (c) => c.revokeGrant(5)],
    ["revokeGrant(undefined)", "grantId", (c) => c.revokeGrant(undefined)],
    ["revokeGrant()", "grantId", (c) => c.revokeGrant()],
    ["revokeGrant(null)", "grantId", (c) => c.revokeGrant(null)],
    [
      "revokeGrant(an object with a toString)",
      "grantId",
      (c) => c.revokeGrant({ toString: () => "." }),
    ],
    ["explain(5)", "callId", (c) => c.explain(5)],
    ["explain(undefined)", "callId", (c) => c.explain(undefined)],
    ["explain(null)", "callId", (c) => c.explain(null)],
    ["explain(an array)", "callId", (c) => c.explain(["c-1"])],
    ["audit by a numeric call ID", "callId", (c) => c.audit({ callId: 5 })],
    ["audit by a null call ID", "callId", (c) => c.audit({ callId: null, traceId: "t-1" })],
    ["audit by a trace ID in an array", "traceId", (c) => c.audit({ traceId: ["t-1"], limit: 5 })],
    ["audit by a boolean trace ID", "traceId", (c) => c.audit({ traceId: true })],
  ];

  it.each(cases)(
    "%s is invalid_input naming %s, and no request is made",
    async (_, field, call) => {
      const counted = countingFetch({ revoked: true });
      const client = createTesseraClient({
        url: "http://127.0.0.1:1",
        token: "t",
        retry: fast,
        fetch: counted.fetch,
      });
      const error = await rejectionOf(call(client as unknown as Loose));
      expect(error).toBeInstanceOf(TesseraClientError);
      expect(error).toMatchObject({ code: "invalid_input", field, attempts: 1, status: undefined });
      expect((error as Error).message).toContain("must be a string");
      expect(counted.urls).toHaveLength(0);
    },
  );

  it("names the value's type, never the value", async () => {
    const client = createTesseraClient({ url: "http://127.0.0.1:1", token: "t" });
    const error = await rejectionOf(
      (client as unknown as Loose).revokeGrant({ toString: () => "g-secret" }),
    );
    expect((error as Error).message).toContain("not object");
    expect((error as Error).message).not.toContain("g-secret");
  });

  it("string IDs are still sent, and an optional one left out is not", async () => {
    const events = countingFetch({ events: [] });
    const auditor = createTesseraClient({
      url: "http://127.0.0.1:1",
      token: "t",
      fetch: events.fetch,
    });
    await auditor.audit({ callId: undefined, traceId: "t-1", limit: 5 });
    await auditor.audit({ callId: "5" });
    const revoked = countingFetch({ revoked: true });
    const issuer = createTesseraClient({
      url: "http://127.0.0.1:1",
      token: "t",
      fetch: revoked.fetch,
    });
    await issuer.revokeGrant("5");
    expect([...events.urls, ...revoked.urls]).toEqual([
      "http://127.0.0.1:1/v1/audit?traceId=t-1&limit=5",
      "http://127.0.0.1:1/v1/audit?callId=5",
      "http://127.0.0.1:1/v1/grants/5",
    ]);
  });
});

describe("a non-string ID in a JSON body", () => {
  it("is sent as JSON writes it, once, and the route's schema refuses it", async () => {
    // JSON keeps its type (5, not "5"), so the service answers 400 naming the field; the
    // client has nothing to add. Without a string call ID it is not retried.
    const counted = countingFetch({ status: "denied", code: "tool_unavailable" });
    const client = createTesseraClient({
      url: "http://127.0.0.1:1",
      token: "t",
      retry: fast,
      fetch: counted.fetch,
    });
    const request = { recipient: "bob", payload: {}, callId: 5 as unknown as string };
    await client.sendMessage(request);
    expect(counted.bodies).toEqual(['{"recipient":"bob","payload":{},"callId":5}']);
    expect(ROUTES.sendMessage.body.safeParse(JSON.parse(counted.bodies[0] ?? "")).success).toBe(
      false,
    );
    for (const body of [
      { ...request, callId: null },
      { action: "a", resource: { namespace: "n", path: [] }, callId: 5 },
    ]) {
      const route = "action" in body ? ROUTES.authorize : ROUTES.sendMessage;
      expect(route.body.safeParse(body).success).toBe(false);
    }
    expect(
      ROUTES.deriveGrant.body.safeParse({ parentId: 5, subject: "s", capabilities: [] }).success,
    ).toBe(false);
    expect(ROUTES.a2uiSettle.body.safeParse({ handle: 5, value: null }).success).toBe(false);
  });
});
