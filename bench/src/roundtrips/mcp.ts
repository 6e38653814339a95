import { randomBytes } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { openStores } from "@tessera/core";
import { createMcpGateway, IDEMPOTENCY_KEY, tokenDigest } from "@tessera/mcp";
import type { DriverCounter } from "@tessera/testkit/round-trips";
import { z } from "zod";
import type { Counted } from "./service.js";

const TOKEN = "bench-round-trips-token";

/**
 * `tools/call` through the gateway over `url`, counted by `counter` when the gateway hands each
 * call's response to its transport: `acts` allowed calls and `acts` refused ones, each alone
 * after the answers of the ones before it were settled. In-memory transports on both sides:
 * only the stores' driver is counted.
 */
export async function countMcp(
  url: string,
  counter: DriverCounter,
  acts: number,
): Promise<{ allowed: Counted; refused: Counted }> {
  const stores = await openStores(url);
  await stores.grants.add({
    id: `rt-tool-${randomBytes(4).toString("hex")}`,
    namespaceId: "bench",
    issuer: "host",
    subject: "agent",
    capabilities: [
      {
        resource: { namespace: "mcp", path: ["up", "send", "colleague"] },
        actions: ["tools/call"],
        scope: "exact",
      },
    ],
    constraints: { maxUses: 10 * acts },
    issuedAt: new Date(Date.now() - 60_000).toISOString(),
  });
  const upstream = new McpServer({ name: "up", version: "1.0.0" });
  upstream.registerTool("send", { inputSchema: { to: z.string() } }, async ({ to }) => ({
    content: [{ type: "text", text: `sent to ${to}` }],
  }));
  const [gatewaySide, upstreamSide] = InMemoryTransport.createLinkedPair();
  await upstream.connect(upstreamSide);
  const gateway = await createMcpGateway({
    upstreams: { up: { transport: gatewaySide } },
    tools: { up: { send: { bind: ["to"] } } },
    principals: [
      { tokenSha256: tokenDigest(TOKEN), namespaceId: "bench", actor: "agent", authority: "host" },
    ],
    grants: stores.grants,
    usage: stores.usage,
    claims: stores.claims,
    audit: stores.audit,
    ...(stores.acts === undefined ? {} : { acts: stores.acts }),
  });
  const atReply: { writes: number; total: number }[] = [];
  const [mine, theirs] = InMemoryTransport.createLinkedPair();
  const send = theirs.send.bind(theirs);
  theirs.send = async (message: JSONRPCMessage, options) => {
    if ("id" in message && ("result" in message || "error" in message)) {
      atReply.push({ writes: counter.writes, total: counter.total });
    }
    return send(message, options);
  };
  await gateway.serve(theirs, TOKEN);
  const client = new Client({ name: "bench-round-trips", version: "1.0.0" });
  await client.connect(mine);
  const tag = randomBytes(4).toString("hex");
  let sent = 0;
  const count = async (to: string): Promise<Counted> => {
    let writes = 0;
    let total = 0;
    const answers: string[] = [];
    for (let i = 0; i < acts; i++) {
      const key = `${tag}-${sent++}`;
      const call = { name: "up.send", arguments: { to }, _meta: { [IDEMPOTENCY_KEY]: key } };
      // The grant set read and cached first (a cold read on Redis is a script, which a count
      // at the driver cannot tell from a write); the answers of earlier calls settle meanwhile.
      await client.callTool({ ...call, _meta: { [IDEMPOTENCY_KEY]: `warm-${key}` } });
      await new Promise((resolve) => setTimeout(resolve, 60));
      counter.reset();
      const result = await client.callTool(call);
      const seen = atReply.at(-1) ?? { writes: Number.NaN, total: Number.NaN };
      writes += seen.writes;
      total += seen.total;
      answers.push(result.isError ? "refused" : "allowed");
    }
    return { acts, writes, total, answers };
  };
  try {
    return { allowed: await count("colleague"), refused: await count("stranger") };
  } finally {
    await client.close();
    await gateway.close();
    await stores.close();
  }
}
