import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InProcessTransport, openStores, type StoreBundle } from "@tessera/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen, type RunningServer } from "../src/listen.js";
import { principal, ticket } from "./support/service.js";

/**
 * The service over SQLite, retry-safe sends at once on several single-use tickets for one
 * recipient: every ticket delivers once, every request is answered, a retry reads its answer
 * back, and no call ID is left in doubt. (The race itself, acts choosing the same ticket, is
 * shown where it can be forced: packages/sqlite/test/several-grants.test.ts and the MCP
 * gateway's; here the requests mostly reach their decisions one after another.)
 */

const TICKETS = 6;
const ASKER = principal("asker-token-0123456789", {
  namespaceId: "team",
  actor: "asker",
  authority: "host",
  owner: "alice",
});
let dir: string;
let stores: StoreBundle;
let server: RunningServer;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "tessera-grants-"));
  stores = await openStores(`sqlite:${join(dir, "t.db")}`);
  for (let i = 0; i < TICKETS; i++) await stores.grants.add(ticket(`t${i}`, "bob"));
  server = await listen({
    stores,
    principals: [ASKER.config],
    port: 0,
    log: false,
    transport: InProcessTransport.echo(),
  });
});

afterAll(async () => {
  await server.close();
  await stores.close();
  rmSync(dir, { recursive: true, force: true });
});

async function send(callId: string) {
  const reply = await fetch(`${server.url}/v1/messages`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${ASKER.token}` },
    body: JSON.stringify({ recipient: "bob", payload: callId, callId }),
  });
  return { status: reply.status, body: (await reply.json()) as Record<string, unknown> };
}

describe("retry-safe sends at once on several single-use tickets (SQLite)", () => {
  it(`${TICKETS + 2} sends at once on ${TICKETS} tickets: ${TICKETS} delivered, one per ticket; 2 refused`, async () => {
    const replies = await Promise.all(
      Array.from({ length: TICKETS + 2 }, (_, i) => send(`call-${i}`)),
    );
    expect(replies.map((reply) => reply.status)).toEqual(Array(TICKETS + 2).fill(200));
    const delivered = replies.filter((reply) => reply.body.status === "delivered");
    expect(delivered).toHaveLength(TICKETS);
    expect(new Set(delivered.map((reply) => reply.body.grantId)).size).toBe(TICKETS);
    expect(replies.filter((reply) => reply.body.status === "denied")).toHaveLength(2);
    // A retry of each reads its answer back: the same outcome, nothing spent again.
    for (const [i, reply] of replies.entries()) {
      const again = await send(`call-${i}`);
      expect(again.body.status).toBe(reply.body.status);
    }
    for (let i = 0; i < TICKETS; i++) expect(await stores.usage.getUsage("team", `t${i}`)).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await stores.claims.listInDoubt()).toEqual([]);
  });
});
