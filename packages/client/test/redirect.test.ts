import type { ServerResponse } from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import { createTesseraClient } from "../src/index.js";
import { clientErrorOf, json, type StubRequest, stubService } from "./stub.js";

/**
 * A front that answers with a redirect to another host must get nothing through the client:
 * before, fetch followed it, re-sent the bearer token and the payload there, and the client
 * returned that host's JSON as the service's decision.
 */

const TOKEN = "tsk_SECRET_TOKEN_123";
const fast = { attempts: 3, baseDelayMs: 5, maxDelayMs: 20 };
const delivered = {
  status: "delivered",
  messageId: "m-elsewhere",
  grantId: "g-elsewhere",
  callId: "r1",
  reply: "from the wrong host",
};

type Stub = Awaited<ReturnType<typeof stubService>>;
const opened: Stub[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((stub) => stub.close()));
});

async function open(handlers: Parameters<typeof stubService>[0]): Promise<Stub> {
  const stub = await stubService(handlers);
  opened.push(stub);
  return stub;
}

const redirect = (status: number, location: string) => (_: StubRequest, res: ServerResponse) => {
  res.writeHead(status, { location, "content-type": "application/json" });
  // A Tessera-shaped body on the redirect must not be read as the service's error either.
  res.end(JSON.stringify({ error: { code: "not_found", message: "moved" } }));
};

describe("a redirect is never followed", () => {
  it.each([301, 302, 303, 307, 308])(
    "a send answered %i to another host is invalid_response, not retried, and sends nothing there",
    async (status) => {
      const elsewhere = await open([json(200, delivered)]);
      const front = await open([redirect(status, `${elsewhere.url}/v1/messages`)]);
      const client = createTesseraClient({ url: front.url, token: TOKEN, retry: fast });
      const error = await clientErrorOf(
        client.sendMessage({ recipient: "bob", payload: { secret: "payload" }, callId: "r1" }),
      );
      expect(error).toMatchObject({ code: "invalid_response", status, attempts: 1 });
      expect(error.message).toContain("redirect");
      expect(error.message).not.toContain(TOKEN);
      expect(front.seen).toHaveLength(1);
      expect(elsewhere.seen).toHaveLength(0);
    },
  );

  it.each([301, 302, 303, 307, 308])(
    "a read answered %i is not followed either",
    async (status) => {
      const elsewhere = await open([json(200, { tools: ["from the wrong host"] })]);
      const front = await open([redirect(status, `${elsewhere.url}/v1/tools`)]);
      const client = createTesseraClient({ url: front.url, token: TOKEN, retry: fast });
      const error = await clientErrorOf(client.tools());
      expect(error).toMatchObject({ code: "invalid_response", status, attempts: 1 });
      expect(front.seen).toHaveLength(1);
      expect(elsewhere.seen).toHaveLength(0);
    },
  );

  it("names where the redirect pointed, without its credentials or query", async () => {
    const front = await open([redirect(307, "http://user:hunter2@127.0.0.1:9/v1/messages?k=v")]);
    const client = createTesseraClient({ url: front.url, token: TOKEN, retry: fast });
    const error = await clientErrorOf(client.sendMessage({ recipient: "bob", payload: 1 }));
    expect(error.code).toBe("invalid_response");
    expect(error.message).toContain("http://127.0.0.1:9/v1/messages");
    expect(error.message).not.toContain("hunter2");
    expect(error.message).not.toContain("k=v");
  });

  it("asks fetch not to follow, so a fetch the caller passes in is told too", async () => {
    let seenRedirect: RequestInit["redirect"];
    const client = createTesseraClient({
      url: "http://127.0.0.1:1",
      retry: fast,
      fetch: async (_, init) => {
        seenRedirect = init?.redirect;
        return new Response(null, { status: 302, headers: { location: "/elsewhere" } });
      },
    });
    expect(await clientErrorOf(client.health())).toMatchObject({
      code: "invalid_response",
      status: 302,
      attempts: 1,
    });
    expect(seenRedirect).toBe("manual");
  });
});
