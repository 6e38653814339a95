import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InProcessTransport, openStores, type StoreBundle } from "@tessera/core";
import { listen, type RunningServer, tokenDigest } from "@tessera/server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTesseraClient, type TesseraClient } from "../src/index.js";
import { clientErrorOf } from "./stub.js";

const ISSUER = "issuer-token-for-client-tests";
const AGENT = "agent-token-for-client-tests";

const sendToBob = {
  id: "g-bob",
  subject: "asker",
  capabilities: [
    {
      resource: { namespace: "messages", path: ["bob"], owner: "alice" },
      actions: ["messages.send"],
      scope: "exact" as const,
    },
  ],
  constraints: { maxUses: 1 },
};

let stores: StoreBundle;
let server: RunningServer;
let issuer: TesseraClient;
let agent: TesseraClient;

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), "tessera-client-"));
  stores = await openStores(`sqlite:${join(dir, "t.db")}`);
  const identity = { namespaceId: "team", authority: "host" };
  server = await listen({
    stores,
    principals: [
      { tokenSha256: tokenDigest(ISSUER), role: "issuer", actor: "issuer", ...identity },
      {
        tokenSha256: tokenDigest(AGENT),
        role: "agent",
        actor: "asker",
        owner: "alice",
        ...identity,
      },
    ],
    transport: InProcessTransport.echo(),
    port: 0,
    log: false,
  });
  const fast = { attempts: 2, baseDelayMs: 5, maxDelayMs: 10 };
  issuer = createTesseraClient({ url: server.url, token: ISSUER, retry: fast });
  agent = createTesseraClient({ url: server.url, token: AGENT, retry: fast });
});

afterAll(async () => {
  await server?.close();
  await stores?.close();
});

describe("the client against the real service on loopback", () => {
  it("reads liveness and readiness without a token", async () => {
    const anonymous = createTesseraClient({ url: server.url });
    await expect(anonymous.health()).resolves.toEqual({ ok: true });
    await expect(anonymous.ready()).resolves.toEqual({ ready: true });
  });

  it("issues a grant with an issuer token; an agent token is forbidden, a bad one unauthenticated", async () => {
    const { grant } = await issuer.issueGrant(sendToBob);
    expect(grant).toMatchObject({ id: "g-bob", namespaceId: "team", issuer: "host" });
    expect(await clientErrorOf(agent.issueGrant({ ...sendToBob, id: "g-2" }))).toMatchObject({
      code: "forbidden",
      status: 403,
    });
    const stranger = createTesseraClient({ url: server.url, token: "nobody" });
    expect(await clientErrorOf(stranger.listGrants())).toMatchObject({
      code: "unauthenticated",
      status: 401,
    });
  });

  it("sends once: delivered, the same call ID answers the original, the spent ticket hides the tool", async () => {
    expect((await agent.tools()).tools).toContain("messages.send");
    const first = await agent.sendMessage({ recipient: "bob", payload: "hi", callId: "c-1" });
    expect(first).toMatchObject({ status: "delivered", callId: "c-1", reply: "reply from bob" });
    const again = await agent.sendMessage({ recipient: "bob", payload: "hi", callId: "c-1" });
    expect(again).toEqual(first);
    const other = await agent.sendMessage({ recipient: "bob", payload: "hi", callId: "c-2" });
    expect(other).toEqual({ status: "denied", code: "tool_unavailable", callId: "c-2" });
    expect((await agent.tools()).tools).not.toContain("messages.send");
  });

  it("a refusal of a call whose ID the client made up carries that ID, which explains it", async () => {
    const refused = await agent.sendMessage({ recipient: "bob", payload: "no ID given" });
    expect(refused).toEqual({
      status: "denied",
      code: "tool_unavailable",
      callId: expect.any(String),
    });
    const explained = await agent.explain(refused.callId as string);
    expect(explained).toMatchObject({ callId: refused.callId, code: "tool_unavailable" });
    // No retries: no ID is made up, so none is there to give back.
    const once = createTesseraClient({ url: server.url, token: AGENT, retry: { attempts: 1 } });
    expect(await once.sendMessage({ recipient: "bob", payload: "x" })).toEqual({
      status: "denied",
      code: "tool_unavailable",
    });
  });

  it("a call ID reused with another body is a conflict, not a second decision", async () => {
    const error = await clientErrorOf(
      agent.sendMessage({ recipient: "bob", payload: "bye", callId: "c-1" }),
    );
    expect(error).toMatchObject({ code: "call_id_conflict", status: 409, attempts: 1 });
  });

  it("a schema violation is a 400 naming the field, with no retry", async () => {
    const error = await clientErrorOf(
      agent.sendMessage({ recipient: "x".repeat(600), payload: 1, callId: "c-3" }),
    );
    expect(error).toMatchObject({ code: "invalid_request", status: 400, field: "recipient" });
  });

  it("lists grants with usage counts, explains and audits the call, lists no claims in doubt", async () => {
    const { grants } = await issuer.listGrants();
    expect(grants).toEqual([{ grant: expect.objectContaining({ id: "g-bob" }), uses: 1 }]);
    const explained = await agent.explain("c-2");
    expect(explained).toMatchObject({ callId: "c-2", code: "tool_unavailable" });
    const { events } = await agent.audit({ callId: "c-1" });
    expect(events).toEqual([expect.objectContaining({ callId: "c-1", outcome: "allowed" })]);
    await expect(agent.inDoubtClaims()).resolves.toEqual({ claims: [] });
  });

  it("authorizes, and revokes with an issuer token", async () => {
    const asked = {
      action: "messages.send",
      resource: { namespace: "messages", path: ["carol"], owner: "alice" },
      callId: "a-1",
    };
    await expect(agent.authorize(asked)).resolves.toEqual({
      status: "denied",
      code: expect.any(String),
      callId: "a-1",
    });
    await expect(issuer.revokeGrant("g-bob")).resolves.toEqual({ revoked: true });
    const { grants } = await issuer.listGrants();
    expect(grants[0]?.grant.revokedAt).toEqual(expect.any(String));
  });
});

describe("a retry after a dropped answer", () => {
  it("gets the original delivery back, and the message is delivered once", async () => {
    const transport = InProcessTransport.echo();
    const dir = mkdtempSync(join(tmpdir(), "tessera-client-drop-"));
    const own = await openStores(`sqlite:${join(dir, "t.db")}`);
    await own.grants.add({
      ...sendToBob,
      namespaceId: "team",
      issuer: "host",
      issuedAt: new Date().toISOString(),
    });
    const service = await listen({
      stores: own,
      principals: [
        {
          tokenSha256: tokenDigest(AGENT),
          actor: "asker",
          owner: "alice",
          namespaceId: "team",
          authority: "host",
        },
      ],
      transport,
      port: 0,
      log: false,
    });
    // The first answer is read from the service, then the connection is cut before the client
    // sees it: the send was decided, spent and delivered, and the caller does not know.
    const proxy = await dropFirstAnswer(service.url);
    try {
      const client = createTesseraClient({
        url: proxy.url,
        token: AGENT,
        retry: { attempts: 3, baseDelayMs: 5, maxDelayMs: 10 },
      });
      const answer = await client.sendMessage({ recipient: "bob", payload: "once" });
      expect(answer).toMatchObject({ status: "delivered", reply: "reply from bob" });
      expect(proxy.forwarded()).toBe(2);
      expect(transport.delivered).toHaveLength(1);
      expect(transport.delivered[0]?.messageId).toBe(
        answer.status === "delivered" && answer.messageId,
      );
    } finally {
      await proxy.close();
      await service.close();
      await own.close();
    }
  });
});

/** An HTTP relay that forwards every request, but drops the first answer on the floor. */
async function dropFirstAnswer(target: string) {
  const { createServer, request } = await import("node:http");
  let forwarded = 0;
  const relay = createServer((incoming, outgoing) => {
    const upstream = new URL(incoming.url ?? "/", target);
    const sent = request(
      upstream,
      { method: incoming.method, headers: incoming.headers },
      (answer) => {
        forwarded += 1;
        if (forwarded === 1) {
          answer.resume();
          answer.on("end", () => outgoing.socket?.destroy());
          return;
        }
        outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(outgoing);
      },
    );
    incoming.pipe(sent);
  });
  await new Promise<void>((resolve) => relay.listen(0, "127.0.0.1", resolve));
  const { port } = relay.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    forwarded: () => forwarded,
    close: () =>
      new Promise<void>((resolve) => {
        relay.closeAllConnections();
        relay.close(() => resolve());
      }),
  };
}
