/**
 * `ListeningGateway.close()` drains: a call under way answers, and a connected client's
 * message stream (`GET /mcp`, open for as long as the client is) does not hold the close until
 * `drainMs`. The old close cut every connection at once, calls under way included.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  InMemoryAuditSink,
  InMemoryClaimStore,
  InMemoryGrantStore,
  InMemoryGrantUsageStore,
} from "@tessera/core";
import { describe, expect, it } from "vitest";
import { createMcpGateway, listenMcpGateway } from "../src/index.js";
import {
  ALICE_TOKEN,
  connectClient,
  PRINCIPALS,
  readCounts,
  textOf,
  toolGrant,
  UPSTREAM,
} from "./support.js";

describe("the gateway's HTTP close", () => {
  it("lets a call under way answer and ends the clients' message streams", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tessera-mcp-close-"));
    const countFile = join(dir, "count.jsonl");
    const grants = new InMemoryGrantStore();
    await grants.add(toolGrant("alice", ["messages", "slow"]));
    const gateway = await createMcpGateway({
      upstreams: {
        messages: {
          command: process.execPath,
          args: [UPSTREAM],
          env: { COUNT_FILE: countFile, PATH: process.env.PATH ?? "" },
        },
      },
      tools: { messages: { send_message: { bind: ["to"] } } },
      principals: PRINCIPALS,
      grants,
      usage: new InMemoryGrantUsageStore(),
      claims: new InMemoryClaimStore(),
      audit: new InMemoryAuditSink(),
    });
    // Far longer than the test's own timeout: a close that waited for the cut fails it.
    const listening = await listenMcpGateway(gateway, { drainMs: 120_000 });
    const client = await connectClient(listening.url, ALICE_TOKEN);
    try {
      const slow = client.callTool({ name: "messages.slow", arguments: { ms: 800 } });
      const until = Date.now() + 10_000;
      while (readCounts(countFile, "slow") === 0 && Date.now() < until) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(readCounts(countFile, "slow")).toBe(1);
      const closed = listening.close();
      expect(textOf(await slow)).toBe("slept 800");
      await closed;
      // Nothing listens any more: a new call cannot be made.
      await expect(
        client.callTool({ name: "messages.slow", arguments: { ms: 1 } }),
      ).rejects.toThrow();
      expect(readCounts(countFile, "slow")).toBe(1);
    } finally {
      await client.close().catch(() => undefined);
      await gateway.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);
});
