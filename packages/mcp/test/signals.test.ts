/**
 * Signals to `tessera mcp` (HTTP): Node's default for SIGHUP is to end the process, which cut
 * the calls under way and left them in doubt. A log rotation or a service manager's reload
 * sends one; the gateway has nothing to reload, so it says so and goes on serving, also
 * while it drains after a SIGTERM.
 */
import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { slowToolSetup, spawnGateway } from "./processes.js";
import { ALICE_TOKEN, connectClient, readCounts, textOf } from "./support.js";

async function waitFor(check: () => boolean, ms: number): Promise<void> {
  const until = Date.now() + ms;
  while (!check()) {
    if (Date.now() > until) throw new Error("timed out waiting");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe("tessera mcp and SIGHUP", () => {
  let dir: string;
  let config: string;
  let countFile: string;

  beforeAll(async () => {
    ({ dir, config, countFile } = await slowToolSetup("tessera-mcp-signals-"));
  });

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("a SIGHUP is ignored, said as one line, while serving and while draining", async () => {
    const gateway = await spawnGateway(config);
    let stdout = "";
    gateway.child.stdout?.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    const exited = new Promise<number | null>((resolve) => gateway.child.once("close", resolve));
    const client = await connectClient(gateway.url, ALICE_TOKEN);
    try {
      gateway.child.kill("SIGHUP");
      await waitFor(() => stdout.includes('"reload_ignored"'), 10_000);
      // Still serving: a call after the SIGHUP runs.
      const first = await client.callTool({ name: "messages.slow", arguments: { ms: 1 } });
      expect(textOf(first)).toBe("slept 1");

      // A call under way when the SIGTERM comes, and a SIGHUP during the drain.
      const before = readCounts(countFile, "slow");
      const slow = client.callTool({ name: "messages.slow", arguments: { ms: 1_500 } });
      await waitFor(() => readCounts(countFile, "slow") > before, 10_000);
      gateway.child.kill("SIGTERM");
      await waitFor(() => stdout.includes('"stopping"'), 10_000);
      gateway.child.kill("SIGHUP");
      expect(textOf(await slow)).toBe("slept 1500");
      expect(await exited).toBe(0);
      const events = stdout
        .trim()
        .split("\n")
        .map((line) => (JSON.parse(line) as { event?: string }).event)
        .filter((event) => event !== undefined && event !== "decision");
      expect(events).toEqual(["reload_ignored", "stopping", "reload_ignored", "stopped"]);
    } finally {
      await client.close().catch(() => undefined);
      await gateway.stop();
    }
  }, 60_000);
});
