import { mkdtempSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openStores, type StoreBundle } from "@tessera/core";
import { MAX_JSON_DEPTH } from "@tessera/core/store-kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen, type RunningServer } from "../src/listen.js";
import { webhookTransport } from "../src/transport/webhook.js";
import { principal, ticket } from "./support/service.js";

/**
 * A message payload nested past MAX_JSON_DEPTH, over HTTP: `invalid_request` with one audit
 * event and nothing spent or POSTed, with or without a call ID (with one, hashing the body for
 * its claim overflowed the stack at 10,000 levels: a 500).
 */

const ASKER = principal("asker-token-0123456789", {
  namespaceId: "team",
  actor: "asker",
  authority: "host",
  owner: "alice",
});
let receiver: Server;
let posted = 0;
let stores: StoreBundle;
let server: RunningServer;

beforeAll(async () => {
  receiver = createServer((req, res) => {
    posted++;
    req.resume();
    req.on("end", () => res.writeHead(204).end());
  });
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/`;
  stores = await openStores(`sqlite:${join(mkdtempSync(join(tmpdir(), "tessera-deep-")), "t.db")}`);
  for (const id of ["t1", "t2", "t3", "t4", "t5"]) await stores.grants.add(ticket(id, "bob"));
  server = await listen({
    stores,
    principals: [ASKER.config],
    port: 0,
    log: false,
    transport: webhookTransport({ recipients: { bob: { url, secret: "bob-secret-0123456789" } } }),
  });
});

afterAll(async () => {
  await server.close();
  await stores.close();
  receiver.closeAllConnections();
  receiver.close();
});

/** `levels` nested objects around a string, written as text (no recursive serializer). */
function deepJson(levels: number): string {
  return `${'{"a":'.repeat(levels)}"x"${"}".repeat(levels)}`;
}

async function send(payloadJson: string, callId?: string) {
  const reply = await fetch(`${server.url}/v1/messages`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      authorization: `Bearer ${ASKER.token}`,
    },
    body: `{"recipient":"bob",${callId === undefined ? "" : `"callId":"${callId}",`}"payload":${payloadJson}}`,
  });
  return { status: reply.status, body: (await reply.json()) as Record<string, unknown> };
}

describe("a deeply nested payload at the service", () => {
  it.each([
    [MAX_JSON_DEPTH + 1, "deep-65"],
    [10_000, "deep-10k"],
    [10_000, undefined],
    [10_800, "deep-10.8k"],
  ])(
    "%i levels (call ID %s): 200 denied invalid_request, one audit event, nothing spent",
    async (levels, callId) => {
      const before = posted;
      const events = (await stores.audit.read()).length;
      const { status, body } = await send(deepJson(levels), callId);
      expect(status).toBe(200);
      expect(body).toMatchObject({ status: "denied", code: "invalid_request" });
      // A denial's event is written just after the reply (the kernel's write window).
      let after = await stores.audit.read();
      for (let i = 0; i < 50 && after.length === events; i++) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        after = await stores.audit.read();
      }
      expect(after.slice(events).map((e) => [e.reason, e.code])).toEqual([
        ["invalid_request", "invalid_request"],
      ]);
      if (callId !== undefined) expect(after.at(-1)?.callId).toBe(callId);
      expect(posted).toBe(before);
      for (const id of ["t1", "t2", "t3", "t4", "t5"]) {
        expect(await stores.usage.getUsage("team", id)).toBe(0);
      }
    },
  );

  it(`${MAX_JSON_DEPTH} levels with a call ID are claimed: delivered once, the retry replayed`, async () => {
    const before = posted;
    const first = await send(deepJson(MAX_JSON_DEPTH - 1), "deep-64");
    expect(first.body).toMatchObject({ status: "delivered" });
    const retry = await send(deepJson(MAX_JSON_DEPTH - 1), "deep-64");
    expect(retry.body).toEqual(first.body);
    expect(posted).toBe(before + 1);
  });
});
