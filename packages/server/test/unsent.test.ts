import { mkdtempSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  createKernel,
  explain,
  InMemoryAuditSink,
  InMemoryGrantStore,
  InMemoryGrantUsageStore,
  openStores,
  type StoreBundle,
} from "@tessera/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen, type RunningServer } from "../src/listen.js";
import { webhookTransport } from "../src/transport/webhook.js";
import { principal, ticket } from "./support/service.js";

/**
 * A send whose webhook provably never left gives its single-use ticket back (audit
 * `use_returned`): the receiver's port refused the connection, or the payload could not be
 * serialized. One that reached the receiver (a 500) keeps it spent.
 */

const ASKER = principal("asker-token-0123456789", {
  namespaceId: "team",
  actor: "asker",
  authority: "host",
  owner: "alice",
});
const SECRET = "bob-secret-0123456789";
let receiver: Server;
let posts = 0;
let up: string;
let closedPort: string;
let stores: StoreBundle;
let server: RunningServer;

beforeAll(async () => {
  receiver = createServer((req, res) => {
    posts++;
    req.resume();
    req.on("end", () => res.writeHead(500).end());
  });
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  up = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/`;
  // A port that was just free: nothing listens there, so connecting is refused.
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  closedPort = `http://127.0.0.1:${(probe.address() as AddressInfo).port}/`;
  await new Promise<void>((resolve) => probe.close(() => resolve()));

  stores = await openStores(
    `sqlite:${join(mkdtempSync(join(tmpdir(), "tessera-unsent-")), "t.db")}`,
  );
  await stores.grants.add(ticket("t-down", "down"));
  await stores.grants.add(ticket("t-500", "failing"));
  server = await listen({
    stores,
    principals: [ASKER.config],
    port: 0,
    log: false,
    transport: webhookTransport({
      recipients: {
        down: { url: closedPort, secret: SECRET },
        failing: { url: up, secret: SECRET },
      },
    }),
  });
});

afterAll(async () => {
  await server.close();
  await stores.close();
  receiver.closeAllConnections();
  receiver.close();
});

async function send(recipient: string, callId: string) {
  const reply = await fetch(`${server.url}/v1/messages`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${ASKER.token}` },
    body: JSON.stringify({ recipient, payload: { q: "lunch?" }, callId }),
  });
  return (await reply.json()) as Record<string, unknown>;
}

describe("the service's webhook transport and a ticket", () => {
  it("connection refused: delivery_failed, the use given back (use_returned), the ticket still usable", async () => {
    expect(await send("down", "refused-1")).toEqual({ status: "denied", code: "delivery_failed" });
    expect(await stores.usage.getUsage("team", "t-down")).toBe(0);
    const events = await stores.audit.read({ callId: "refused-1" });
    expect(events.map((e) => e.reason)).toEqual(["allowed", "delivery_failed", "use_returned"]);
    expect(events[1]?.detail).toBe("transport answered unreachable; nothing was sent");
    const explained = await fetch(`${server.url}/v1/explain?callId=refused-1`, {
      headers: { authorization: `Bearer ${ASKER.token}` },
    });
    expect(await explained.json()).toMatchObject({ verdict: "use_returned" });
    // Still a live single-use ticket: the next send is decided and tried again, not refused
    // as spent (tool_unavailable).
    expect(await send("down", "refused-2")).toEqual({ status: "denied", code: "delivery_failed" });
    expect(await stores.usage.getUsage("team", "t-down")).toBe(0);
  });

  it("the receiver answered 500: the use stays spent, nothing returned", async () => {
    const before = posts;
    expect(await send("failing", "answered-1")).toEqual({
      status: "denied",
      code: "delivery_failed",
    });
    expect(posts).toBe(before + 1);
    expect(await stores.usage.getUsage("team", "t-500")).toBe(1);
    const events = await stores.audit.read({ callId: "answered-1" });
    expect(events.map((e) => e.reason)).toEqual(["allowed", "delivery_failed"]);
    // Spent: refused at the capability check (the unspent ticket for "down" keeps the tool
    // visible, so it is no_matching_grant rather than tool_unavailable).
    expect(await send("failing", "answered-2")).toEqual({
      status: "denied",
      code: "no_matching_grant",
    });
  });
});

describe("a payload the webhook cannot serialize (a library host's)", () => {
  it.each([
    ["a BigInt", { amount: 10n }],
    [
      "a toJSON that throws",
      {
        when: {
          toJSON: () => {
            throw new Error("not serializable");
          },
        },
      },
    ],
  ])("%s: unserializable, nothing POSTed, the use given back", async (_t, payload) => {
    const grants = new InMemoryGrantStore();
    const usage = new InMemoryGrantUsageStore();
    const audit = new InMemoryAuditSink();
    await grants.add(ticket("t", "bob"));
    const transport = webhookTransport({ recipients: { bob: { url: up, secret: SECRET } } });
    const kernel = createKernel({ grants, usage, audit, transport });
    const turn = await kernel.openTurnAuthority({
      namespaceId: "team",
      actor: "asker",
      authority: "host",
      owner: "alice",
      traceId: "t",
    });
    const before = posts;
    expect(await turn.sendMessage({ recipient: "bob", payload, callId: "odd" })).toEqual({
      status: "denied",
      code: "delivery_failed",
    });
    expect(posts).toBe(before);
    expect(await usage.getUsage("team", "t")).toBe(0);
    expect(audit.events.map((e) => [e.reason, e.detail])).toEqual([
      ["allowed", undefined],
      ["delivery_failed", "transport answered unserializable; nothing was sent"],
      ["use_returned", "the transport sent nothing: one use was given back"],
    ]);
    expect((await explain(audit, "odd")).verdict).toBe("use_returned");
  });
});
