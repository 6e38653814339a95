import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openStores, type StoreBundle } from "@tessera/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen, type RunningServer } from "../src/listen.js";
import { tokenDigest } from "../src/principals.js";

const TOKEN = "agent-token-1";
const principal = {
  tokenSha256: tokenDigest(TOKEN),
  namespaceId: "team",
  actor: "asker",
  authority: "host",
  owner: "alice",
};
const resource = (recipient: string) => ({
  namespace: "messages",
  path: [recipient],
  owner: "alice",
});

let stores: StoreBundle;
let server: RunningServer;

beforeAll(async () => {
  stores = await openStores(`sqlite:${join(mkdtempSync(join(tmpdir(), "serve-")), "t.db")}`);
  await stores.grants.add({
    id: "ticket-0",
    namespaceId: "team",
    issuer: "host",
    subject: "asker",
    capabilities: [
      { resource: resource("colleague-0"), actions: ["messages.send"], scope: "exact" },
    ],
    constraints: { maxUses: 1 },
    issuedAt: new Date(Date.now() - 1000).toISOString(),
  });
  server = await listen({ stores, principals: [principal], port: 0, log: false });
});

afterAll(async () => {
  await server?.close();
  await stores?.close();
});

function post(body: unknown, token: string | null = TOKEN, raw?: string) {
  return fetch(`${server.url}/v1/authorize`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(token === null ? {} : { authorization: `Bearer ${token}` }),
    },
    body: raw ?? JSON.stringify(body),
  });
}

describe("the service over loopback HTTP (listen)", () => {
  it("spends a single-use ticket exactly once under 20 concurrent requests", async () => {
    const replies = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        post({ action: "messages.send", resource: resource("colleague-0"), callId: `race-${i}` }),
      ),
    );
    expect(replies.every((r) => r.status === 200)).toBe(true);
    const bodies = (await Promise.all(replies.map((r) => r.json()))) as Array<{ status: string }>;
    expect(bodies.filter((b) => b.status === "allowed")).toHaveLength(1);
    expect(bodies.filter((b) => b.status === "denied")).toHaveLength(19);
    expect(await stores.usage.getUsage("team", "ticket-0")).toBe(1);
  });

  it("refuses a recipient no ticket names, with a 200 and status denied", async () => {
    const reply = await post({
      action: "messages.send",
      resource: resource("mallory"),
      callId: "stranger",
    });
    expect(reply.status).toBe(200);
    expect(await reply.json()).toEqual({ status: "denied", code: "tool_unavailable" });
  });

  it("explains a caller's own decision from audit", async () => {
    const reply = await fetch(`${server.url}/v1/explain?callId=stranger`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(reply.status).toBe(200);
    expect(await reply.json()).toMatchObject({ verdict: "never_granted" });
  });

  it("refuses an unknown or missing token before reading the body", async () => {
    const body = { action: "messages.send", resource: resource("colleague-0") };
    expect((await post(body, "wrong-token")).status).toBe(401);
    expect((await post(body, null)).status).toBe(401);
  });

  it("refuses malformed, mis-shaped and oversize bodies with invalid_request", async () => {
    const notJson = await post(undefined, TOKEN, "{not json");
    expect(notJson.status).toBe(400);
    expect(await notJson.json()).toMatchObject({ error: { code: "invalid_request" } });

    const authorityInBody = await post({
      action: "messages.send",
      resource: resource("colleague-0"),
      authority: "host",
    });
    expect(authorityInBody.status).toBe(400);

    const huge = await post({ action: "x".repeat(100_000), resource: resource("c") });
    expect(huge.status).toBe(413);
  });

  it("answers unknown routes with 404 and health without a token", async () => {
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    const missing = await fetch(`${server.url}/v1/nothing`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(missing.status).toBe(404);
  });
});
