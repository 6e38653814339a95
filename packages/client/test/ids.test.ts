import { afterEach, describe, expect, it } from "vitest";
import { createTesseraClient, TesseraClientError } from "../src/index.js";
import { json, stubService } from "./stub.js";

/**
 * An ID holding a lone surrogate is not text a URL can carry: before, `revokeGrant` threw a raw
 * `URIError` and `explain("c-\ud800")` asked about `c-\ufffd`, so it answered another ID's
 * verdict. The service refuses such IDs; the client refuses them too, before sending anything.
 */

const fast = { attempts: 3, baseDelayMs: 5, maxDelayMs: 20 };
const explained = { callId: "c-\ufffd", verdict: "spent", code: null, summary: "another call" };

let stub: Awaited<ReturnType<typeof stubService>> | undefined;
afterEach(async () => {
  await stub?.close();
  stub = undefined;
});

async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => undefined,
    (e: unknown) => e,
  );
}

describe("an ID with a lone surrogate", () => {
  const cases: [string, string, (client: ReturnType<typeof createTesseraClient>) => unknown][] = [
    ["revokeGrant", "grantId", (c) => c.revokeGrant("g-\ud800")],
    ["explain", "callId", (c) => c.explain("c-\ud800")],
    ["explain (a low half)", "callId", (c) => c.explain("c-\udc00x")],
    ["audit by call ID", "callId", (c) => c.audit({ callId: "c-\ud800", limit: 5 })],
    ["audit by trace ID", "traceId", (c) => c.audit({ traceId: "\udfff-t" })],
  ];

  it.each(cases)("%s is invalid_input naming %s, and nothing is sent", async (_, field, call) => {
    stub = await stubService([json(200, explained)]);
    const client = createTesseraClient({ url: stub.url, token: "t", retry: fast });
    const error = await rejectionOf(call(client) as Promise<unknown>);
    expect(error).toBeInstanceOf(TesseraClientError);
    expect(error).toMatchObject({ code: "invalid_input", field, attempts: 1 });
    expect((error as Error).message).toContain("lone surrogate");
    expect(stub.seen).toHaveLength(0);
  });

  it("a well-formed ID outside the BMP is still sent, encoded", async () => {
    stub = await stubService([
      json(200, { callId: "c-😀", verdict: "unknown", code: null, summary: "s" }),
      json(200, { revoked: true }),
    ]);
    const client = createTesseraClient({ url: stub.url, token: "t" });
    await client.explain("c-😀");
    await client.revokeGrant("g-😀");
    expect(stub.seen.map((r) => r.url)).toEqual([
      "/v1/explain?callId=c-%F0%9F%98%80",
      "/v1/grants/g-%F0%9F%98%80",
    ]);
  });
});
