/**
 * The gateway over SQLite, whose act ledger undoes a spend that lost: calls in flight at once
 * on a tool covered by several single-use grants are each decided on a grant with a use left,
 * rather than refused because they all chose the first one. Every use runs the tool once.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { openStores, type StoreBundle } from "@tessera/core";
import { createMcpGateway, IDEMPOTENCY_KEY, type McpGateway } from "@tessera/mcp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { ALICE_TOKEN, PRINCIPALS, toolGrant } from "./support.js";

const GRANTS = 4;

describe("tools/call on several single-use grants at once (SQLite)", () => {
  let dir: string;
  let stores: StoreBundle;
  let gateway: McpGateway;
  let client: Client;
  let runs = 0;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "tessera-mcp-grants-"));
    stores = await openStores(`sqlite:${join(dir, "t.db")}`);
    for (let i = 0; i < GRANTS; i++) {
      await stores.grants.add(toolGrant("alice", ["up", "send", "colleague"], { maxUses: 1 }));
    }
    const upstream = new McpServer({ name: "up", version: "1.0.0" });
    upstream.registerTool("send", { inputSchema: { to: z.string() } }, async ({ to }) => {
      runs++;
      return { content: [{ type: "text", text: `sent to ${to}` }] };
    });
    const [gatewaySide, upstreamSide] = InMemoryTransport.createLinkedPair();
    await upstream.connect(upstreamSide);
    gateway = await createMcpGateway({
      upstreams: { up: { transport: gatewaySide } },
      tools: { up: { send: { bind: ["to"] } } },
      principals: PRINCIPALS,
      grants: stores.grants,
      usage: stores.usage,
      claims: stores.claims,
      audit: stores.audit,
      acts: stores.acts,
    });
    const [mine, theirs] = InMemoryTransport.createLinkedPair();
    await gateway.serve(theirs, ALICE_TOKEN);
    client = new Client({ name: "test", version: "1.0.0" });
    await client.connect(mine);
  });

  afterAll(async () => {
    await client?.close();
    await gateway?.close();
    await stores?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it(`${GRANTS} calls at once on ${GRANTS} single-use grants all run; the next is refused`, async () => {
    const calls = Array.from({ length: GRANTS }, (_, i) =>
      client.callTool({
        name: "up.send",
        arguments: { to: "colleague" },
        _meta: { [IDEMPOTENCY_KEY]: `k-${i}` },
      }),
    );
    const results = await Promise.all(calls);
    expect(results.map((result) => result.isError ?? false)).toEqual(Array(GRANTS).fill(false));
    expect(runs).toBe(GRANTS);
    const last = await client.callTool({
      name: "up.send",
      arguments: { to: "colleague" },
      _meta: { [IDEMPOTENCY_KEY]: "k-last" },
    });
    expect(last.isError).toBe(true);
    expect(runs).toBe(GRANTS);
    const events = await stores.audit.read();
    expect(events.filter((event) => event.outcome === "allowed")).toHaveLength(GRANTS);
  });
});
