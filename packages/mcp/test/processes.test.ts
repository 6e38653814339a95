import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { McpError } from "@modelcontextprotocol/sdk/types.js";
import { openStores, type StoreBundle } from "@tessera/core";
import { serviceUrl } from "@tessera/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { removeRun } from "../../../test/support/scratch-stores.js";
import { type GatewayProcess, spawnGateway, writeConfig } from "./processes.js";
import { ALICE_TOKEN, connectClient, readCounts, textOf, toolGrant } from "./support.js";

const KEY = "io.tessera/idempotency-key";

const backends = [
  [
    "PostgreSQL",
    serviceUrl("TESSERA_PG_URL"),
    (url: string, run: string) => `${url}?schema=${run}`,
    "schema",
  ],
  [
    "Redis",
    serviceUrl("TESSERA_REDIS_URL"),
    (url: string, run: string) => `${url}?prefix=${run}:`,
    "prefix",
  ],
] as const;

async function waitFor(check: () => boolean, ms: number): Promise<void> {
  const until = Date.now() + ms;
  while (!check()) {
    if (Date.now() > until) throw new Error("timed out waiting");
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/**
 * The call's answer once it is kept. It is written after the reply (with those of other calls
 * within a short window), so a duplicate that reaches another gateway right after the reply
 * may still read `call_in_progress`; only that answer is waited out, never forwarded.
 */
async function recordedAnswer(client: Client, call: Parameters<Client["callTool"]>[0]) {
  const until = Date.now() + 10_000;
  for (;;) {
    try {
      return await client.callTool(call);
    } catch (error) {
      const code = ((error as McpError).data as { code?: string } | undefined)?.code;
      if (code !== "call_in_progress" || Date.now() > until) throw error;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }
}

for (const [name, url, scoped, kind] of backends) {
  describe.skipIf(url === undefined)(`tessera mcp processes sharing ${name}`, () => {
    const run = `mcp_${randomUUID().replaceAll("-", "").slice(0, 12)}`;
    const storeUrl = scoped(url ?? "", run);
    let dir: string;
    let countFile: string;
    let config: string;
    let stores: StoreBundle;
    const gateways: GatewayProcess[] = [];
    const clients: Client[] = [];
    const start = async () => {
      const gateway = await spawnGateway(config);
      gateways.push(gateway);
      return gateway;
    };
    const client = async (gateway: GatewayProcess) => {
      const c = await connectClient(gateway.url, ALICE_TOKEN);
      clients.push(c);
      return c;
    };

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), "tessera-mcp-procs-"));
      countFile = join(dir, "count.jsonl");
      stores = await openStores(storeUrl);
      await stores.grants.add(toolGrant("alice", ["messages", "slow"]));
      config = writeConfig(dir, storeUrl, countFile);
    }, 30_000);

    afterAll(async () => {
      try {
        await Promise.allSettled(clients.map((c) => c.close()));
        await Promise.allSettled(gateways.map((g) => g.stop()));
        await stores?.close();
        rmSync(dir, { recursive: true, force: true });
      } finally {
        // The run's schema or keys (audit streams never expire); a failure here fails the file.
        await removeRun(kind, url ?? "", run);
      }
    });

    it("the same call sent to two gateway processes at once reaches the upstream once", async () => {
      const [one, two] = await Promise.all([start(), start()]);
      const [a, b] = await Promise.all([
        client(one as GatewayProcess),
        client(two as GatewayProcess),
      ]);
      const call = {
        name: "messages.slow",
        arguments: { ms: 300 },
        _meta: { [KEY]: `both-${run}` },
      };
      const before = readCounts(countFile, "slow");
      const settled = await Promise.allSettled([a.callTool(call), b.callTool(call)]);
      expect(readCounts(countFile, "slow") - before).toBe(1);
      // One ran; the other was refused in progress, or (on a slow machine, arriving after the
      // first had finished) answered the recorded result.
      const answered = settled.filter((s) => s.status === "fulfilled");
      expect(answered.length).toBeGreaterThanOrEqual(1);
      for (const s of settled) {
        if (s.status === "rejected")
          expect((s.reason as McpError).data).toEqual({ code: "call_in_progress" });
      }
      // Once its answer is kept, both gateways answer the recorded result.
      const first = (answered[0] as PromiseFulfilledResult<unknown>).value;
      expect(await recordedAnswer(a, call)).toEqual(first);
      expect(await recordedAnswer(b, call)).toEqual(first);
      expect(textOf(first)).toBe("slept 300");
      expect(readCounts(countFile, "slow") - before).toBe(1);
    });

    it("kill -9 between forwarding and settling: in doubt after restart, never forwarded again", async () => {
      const victim = await start();
      const c = await client(victim);
      const key = `killed-${run}`;
      const call = { name: "messages.slow", arguments: { ms: 3000 }, _meta: { [KEY]: key } };
      const before = readCounts(countFile, "slow");
      const pending = c.callTool(call).catch(() => "lost");
      // The upstream has the call: the gateway forwarded it and now waits for the answer.
      await waitFor(() => readCounts(countFile, "slow") > before, 20_000);
      victim.child.kill("SIGKILL");
      await pending;
      const restarted = await start();
      const again = await client(restarted);
      await expect(again.callTool(call)).rejects.toSatisfy(
        (e) =>
          (e as McpError).data !== undefined &&
          ((e as McpError).data as { code: string }).code === "call_in_doubt",
      );
      expect(readCounts(countFile, "slow") - before).toBe(1);
      const inDoubt = await stores.claims.listInDoubt();
      expect(inDoubt.some((claim) => claim.functionCallId === `key:${key}`)).toBe(true);
    });
  });
}
