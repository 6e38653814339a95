import { randomBytes } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { openStores, type StoreBundle } from "@tessera/core";
import { CODE_KEY, createMcpGateway, IDEMPOTENCY_KEY, type McpGateway } from "@tessera/mcp";
import type { DriverCounter } from "@tessera/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { countedBackends } from "../../../test/support/round-trip-backends.js";
import { ALICE_TOKEN, PRINCIPALS, toolGrant } from "./support.js";

/**
 * Durable round trips before the reply, per `tools/call`, counted at the driver (SQLite
 * commits, PostgreSQL statements that write, Redis scripts and write commands) and read at the
 * moment the gateway hands the call's JSON-RPC response to its transport: an allowed call is
 * one write (its act: claim, spend, event), and so is a refusal (the claim, settled with the
 * refusal, and the event). The tool result is settled into the claim after the reply. Exact
 * counts, not rates.
 */

const BACKENDS = countedBackends(`mcp_${randomBytes(6).toString("hex")}`);

for (const backend of BACKENDS) {
  const url = backend.url();
  describe.skipIf(url === undefined)(
    `tools/call: durable round trips before the reply: ${backend.name}`,
    () => {
      let counter: DriverCounter;
      let stores: StoreBundle;
      let gateway: McpGateway;
      let client: Client;
      let runs = 0;
      /** Writes counted when each response was handed to the transport, by JSON-RPC id. */
      const atReply = new Map<
        string | number,
        { writes: number; total: number; written: readonly string[] }
      >();

      beforeAll(async () => {
        // Before the stores open: a Redis connection binds its driver's method when it is made.
        counter = backend.counter();
        stores = await openStores(url as string);
        await stores.grants.add(toolGrant("alice", ["up", "send", "colleague"], { maxUses: 50 }));
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
        const send = theirs.send.bind(theirs);
        theirs.send = async (message: JSONRPCMessage, options) => {
          if ("id" in message && ("result" in message || "error" in message)) {
            atReply.set(message.id as string | number, {
              writes: counter.writes,
              total: counter.total,
              written: [...counter.written],
            });
          }
          return send(message, options);
        };
        await gateway.serve(theirs, ALICE_TOKEN);
        client = new Client({ name: "test", version: "1.0.0" });
        await client.connect(mine);
      });

      afterAll(async () => {
        await client?.close();
        await gateway?.close();
        await stores?.close();
        counter?.stop();
        await backend.cleanup();
      });

      let sent = 0;
      /** One call after the writes of earlier ones have landed; the writes before its reply. */
      async function writesBeforeReply(to: string) {
        const key = `k-${sent++}`;
        const call = { name: "up.send", arguments: { to }, _meta: { [IDEMPOTENCY_KEY]: key } };
        // The grant set read and cached first (a cold read on Redis is a script, which a count
        // at the driver cannot tell from a write); earlier calls' answers land meanwhile.
        await client.callTool({ ...call, _meta: { [IDEMPOTENCY_KEY]: `warm-${key}` } });
        await new Promise((resolve) => setTimeout(resolve, 150));
        const before = new Set(atReply.keys());
        counter.reset();
        const result = await client.callTool(call);
        const id = [...atReply.keys()].find((k) => !before.has(k));
        const seen = id === undefined ? undefined : atReply.get(id);
        return { result, writes: seen?.writes, total: seen?.total, written: seen?.written };
      }

      // PostgreSQL's and Redis's ledgers check the grant version in the act's statement or
      // script: the warm call reads nothing before it (SQLite's local reads are not counted).
      it.runIf(backend.name !== "sqlite")(
        "an allowed call on a warm tool: its act is the only statement before the reply",
        async () => {
          const { result, total, writes, written } = await writesBeforeReply("colleague");
          expect(result.isError).toBeFalsy();
          expect(total, String(written)).toBe(1);
          expect(writes).toBe(1);
        },
      );

      it("an allowed call: exactly one write before the reply (the act); the answer after it", async () => {
        const before = runs;
        const { result, writes, written } = await writesBeforeReply("colleague");
        expect(result.isError).toBeFalsy();
        expect(runs).toBe(before + 2);
        expect(writes, String(written)).toBe(1);
        // Settled after the reply: the answer lands in the claim's own field.
        await new Promise((resolve) => setTimeout(resolve, 150));
        const settled = await stores.claims.listInDoubt();
        expect(settled).toEqual([]);
      });

      it("a refused call: exactly one write before the reply (the claim, settled with the refusal)", async () => {
        const before = runs;
        const { result, writes, written } = await writesBeforeReply("stranger");
        expect(result.isError).toBe(true);
        expect(result._meta?.[CODE_KEY]).toBe("no_matching_grant");
        expect(runs).toBe(before);
        expect(writes, String(written)).toBe(1);
      });
    },
  );
}
