/**
 * `ListeningGateway.close()` drains: a call under way answers, and a connected client's
 * message stream (`GET /mcp`, open for as long as the client is) does not hold the close until
 * `drainMs`. The old close cut every connection at once, calls under way included.
 */
import { describe, expect, it } from "vitest";
import { ALICE_TOKEN, startHarness, textOf, toolGrant } from "./support.js";

describe("the gateway's HTTP close", () => {
  it("lets a call under way answer and ends the clients' message streams", async () => {
    // A drain far longer than the test's own timeout: a close that waited for the cut fails it.
    const harness = await startHarness({}, [toolGrant("alice", ["messages", "slow"])], {
      drainMs: 120_000,
    });
    try {
      const client = await harness.client(ALICE_TOKEN);
      const slow = client.callTool({ name: "messages.slow", arguments: { ms: 800 } });
      const until = Date.now() + 10_000;
      while (harness.counts("slow") === 0 && Date.now() < until) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(harness.counts("slow")).toBe(1);
      const closed = harness.listening.close();
      expect(textOf(await slow)).toBe("slept 800");
      await closed;
      // Nothing listens any more: a new call cannot be made, and nothing more ran.
      await expect(
        client.callTool({ name: "messages.slow", arguments: { ms: 1 } }),
      ).rejects.toThrow();
      expect(harness.counts("slow")).toBe(1);
    } finally {
      await harness.close();
    }
  }, 30_000);
});
