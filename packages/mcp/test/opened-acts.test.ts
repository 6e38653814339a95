import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { AuditEvent } from "@tessera/core";
import {
  IDEMPOTENCY_KEY,
  type OpenedGateway,
  openMcpGateway,
  parseGatewayConfig,
} from "@tessera/mcp";
import type { DriverCounter } from "@tessera/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { countedBackends } from "../../../test/support/round-trip-backends.js";
import { ALICE_TOKEN, PRINCIPALS, readCounts, toolGrant, UPSTREAM } from "./support.js";

/**
 * The gateway as `tessera mcp` opens it: `openMcpGateway` from a config naming a store URL,
 * with `onDecision` (the decision log). Observing the act ledger's decisions must not hide what
 * the store's ledger declares: that it checks grant versions inside each act (so a warm call is
 * its act alone, one statement or script on PostgreSQL and Redis) and that it withdraws an act
 * whose reply was lost. Before, the observer kept `record` only: every warm call read its
 * grant version first, a second round trip before the reply.
 */

const BACKENDS = countedBackends(`mcp_${randomBytes(6).toString("hex")}`).filter(
  (backend) => backend.name !== "sqlite",
);

for (const backend of BACKENDS) {
  const url = backend.url();
  describe.skipIf(url === undefined)(
    `openMcpGateway with onDecision (tessera mcp): ${backend.name}`,
    () => {
      let counter: DriverCounter;
      let opened: OpenedGateway;
      let client: Client;
      let dir: string;
      const decisions: AuditEvent[] = [];
      const atReply = new Map<string | number, { total: number; written: readonly string[] }>();

      beforeAll(async () => {
        counter = backend.counter();
        dir = mkdtempSync(join(tmpdir(), "tessera-mcp-opened-"));
        const config = parseGatewayConfig({
          upstreams: {
            messages: {
              command: process.execPath,
              args: [UPSTREAM],
              env: { COUNT_FILE: join(dir, "count.jsonl"), PATH: process.env.PATH ?? "" },
            },
          },
          tools: { messages: { send_message: { bind: ["to"] } } },
          principals: PRINCIPALS,
          stores: url,
        });
        opened = await openMcpGateway(config, { onDecision: (event) => decisions.push(event) });
        await opened.grants.add(
          toolGrant("alice", ["messages", "send_message", "colleague"], { maxUses: 50 }),
        );
        const [mine, theirs] = InMemoryTransport.createLinkedPair();
        const send = theirs.send.bind(theirs);
        theirs.send = async (message: JSONRPCMessage, options) => {
          if ("id" in message && ("result" in message || "error" in message)) {
            atReply.set(message.id as string | number, {
              total: counter.total,
              written: [...counter.written],
            });
          }
          return send(message, options);
        };
        await opened.gateway.serve(theirs, ALICE_TOKEN);
        client = new Client({ name: "test", version: "1.0.0" });
        await client.connect(mine);
      });

      afterAll(async () => {
        await client?.close();
        await opened?.close();
        counter?.stop();
        await backend.cleanup();
        if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
      });

      it("a warm allowed call is its act alone before the reply, and is logged once", async () => {
        const call = (key: string) => ({
          name: "messages.send_message",
          arguments: { to: "colleague", text: "hi" },
          _meta: { [IDEMPOTENCY_KEY]: `${key}-${randomBytes(4).toString("hex")}` },
        });
        // The grant set read and cached first; its answer lands meanwhile.
        const warm = await client.callTool(call("warm"));
        expect(warm.isError ?? false).toBe(false);
        await new Promise((resolve) => setTimeout(resolve, 150));
        const before = new Set(atReply.keys());
        counter.reset();
        const logged = decisions.length;
        const result = await client.callTool(call("measured"));
        expect(result.isError ?? false).toBe(false);
        const id = [...atReply.keys()].find((k) => !before.has(k));
        const seen = id === undefined ? undefined : atReply.get(id);
        expect(seen?.total, String(seen?.written)).toBe(1);
        expect(decisions.slice(logged).map((e) => e.reason)).toEqual(["allowed"]);
        expect(readCounts(join(dir, "count.jsonl"), "send_message")).toBe(2);
      });
    },
  );
}
