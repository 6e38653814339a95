// The recipient fan-out through MCP: an agent asks three colleagues one question through the
// Tessera MCP gateway, with one single-use ticket per colleague for a `send_message` tool whose
// `to` argument is bound into the resource path. Everything printed is computed from this run:
// deliveries are what the upstream MCP server received, verdicts come from audit.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import {
  explain,
  InMemoryAuditSink,
  InMemoryClaimStore,
  InMemoryGrantStore,
  InMemoryGrantUsageStore,
} from "@tessera/core";
import { createMcpGateway, explainPrincipal, listenMcpGateway, tokenDigest } from "@tessera/mcp";
import { z } from "zod";

const KEY = "io.tessera/idempotency-key";
const TOKEN = "demo-agent-token";
const AGENT = {
  tokenSha256: tokenDigest(TOKEN),
  namespaceId: "acme",
  actor: "asker",
  authority: "host",
  owner: "owner",
};
const json = process.argv.includes("--json");

/** One scene: a fresh upstream, gateway and stores; returns what it needs to tell the story. */
async function scene(recipients) {
  const delivered = [];
  const upstream = new McpServer({ name: "colleagues", version: "1.0.0" });
  upstream.registerTool(
    "send_message",
    { description: "Asks a colleague", inputSchema: { to: z.string(), text: z.string() } },
    async ({ to }) => {
      delivered.push(to);
      return { content: [{ type: "text", text: `reply from ${to}` }] };
    },
  );
  const [gatewaySide, upstreamSide] = InMemoryTransport.createLinkedPair();
  await upstream.connect(upstreamSide);

  const grants = new InMemoryGrantStore();
  const usage = new InMemoryGrantUsageStore();
  const audit = new InMemoryAuditSink();
  const tickets = new Map();
  for (const to of recipients) {
    const grant = await grants.add({
      id: `ticket-${to}`,
      namespaceId: "acme",
      issuer: "host",
      subject: "asker",
      capabilities: [
        {
          resource: { namespace: "mcp", path: ["colleagues", "send_message", to], owner: "owner" },
          actions: ["tools/call"],
          scope: "exact",
        },
      ],
      constraints: { maxUses: 1 },
      issuedAt: new Date(Date.now() - 1000).toISOString(),
    });
    tickets.set(to, grant.id);
  }
  const gateway = await createMcpGateway({
    upstreams: { colleagues: { transport: gatewaySide } },
    tools: { colleagues: { send_message: { bind: ["to"] } } },
    principals: [AGENT],
    grants,
    usage,
    claims: new InMemoryClaimStore(),
    audit,
  });
  const listening = await listenMcpGateway(gateway);
  const client = new Client({ name: "demo-agent", version: "1.0.0" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(listening.url), {
      requestInit: { headers: { authorization: `Bearer ${TOKEN}` } },
    }),
  );
  let calls = 0;
  const send = async (to, key) => {
    calls++;
    const before = delivered.length;
    const result = await client.callTool({
      name: "colleagues.send_message",
      arguments: { to, text: "Can you review my draft?" },
      _meta: { [KEY]: key ?? `call-${calls}` },
    });
    const callId = result._meta?.["io.tessera/call-id"];
    const why = await explain(audit, callId, explainPrincipal(AGENT));
    return {
      to,
      refused: result.isError === true,
      code: result.isError ? result.content[0].text : null,
      verdict: why.verdict,
      reason: why.reason,
      forwarded: delivered.length > before,
      reply: result.isError ? null : result.content[0].text,
    };
  };
  const spent = async (to) => usage.getUsage("acme", tickets.get(to));
  const listed = async () => (await client.listTools()).tools.map((t) => t.name);
  const close = async () => {
    await client.close();
    await listening.close();
    await gateway.close();
  };
  return { send, spent, listed, delivered, grants, close };
}

const scenes = [];

{
  const s = await scene(["colleague-0", "colleague-1", "colleague-2"]);
  const rows = [];
  for (const to of ["colleague-0", "colleague-1", "colleague-2"]) {
    const r = await s.send(to);
    rows.push({ ...r, spent: await s.spent(to) });
  }
  const listedAfter = await s.listed();
  scenes.push({
    title: "three colleagues, three single-use tickets, one MCP session",
    rows,
    deliveries: s.delivered.length,
    distinct: new Set(s.delivered).size === s.delivered.length,
    listedAfter,
  });
  await s.close();
}
{
  const s = await scene(["colleague-0"]);
  const first = await s.send("colleague-0", "retry-me");
  const replay = await s.send("colleague-0", "retry-me");
  const again = await s.send("colleague-0");
  scenes.push({
    title: "the same call retried with its idempotency key, then asked anew",
    rows: [{ ...first, spent: await s.spent("colleague-0") }, { ...replay, replayed: true }, again],
    deliveries: s.delivered.length,
  });
  await s.close();
}
{
  const s = await scene(["colleague-0"]);
  const wrong = await s.send("colleague-1");
  scenes.push({
    title: "a colleague nobody issued a ticket for",
    rows: [{ ...wrong, held: "colleague-0", spent: await s.spent("colleague-0") }],
    deliveries: s.delivered.length,
  });
  await s.close();
}
{
  const s = await scene(["colleague-0", "colleague-1"]);
  await s.grants.revoke("acme", "ticket-colleague-0");
  const revoked = await s.send("colleague-0");
  const other = await s.send("colleague-1");
  scenes.push({
    title: "the owner revokes one ticket; the other is untouched",
    rows: [revoked, other],
    deliveries: s.delivered.length,
  });
  await s.close();
}

if (json) {
  process.stdout.write(`${JSON.stringify({ scenes }, null, 2)}\n`);
} else {
  const out = [];
  scenes.forEach((s, i) => {
    out.push(`${i + 1}. ${s.title}`, "");
    for (const r of s.rows) {
      const to = r.to.padEnd(13);
      if (r.replayed) {
        const how = r.forwarded
          ? "FORWARDED AGAIN to the upstream"
          : "answered from the record, upstream not called";
        out.push(`  REPLAY ${to}  ${how}: ${r.reply}`);
      } else if (!r.refused) {
        const spent = r.spent === undefined ? "" : `ticket spent ${r.spent}/1   `;
        out.push(`  SENT   ${to}  ${spent}${r.reply}`);
      } else if (r.held !== undefined) {
        out.push(`  DENY   ${to}  ${r.code}   ${r.held}'s ticket spent ${r.spent}/1`);
      } else {
        out.push(`  DENY   ${to}  caller is told ${r.code}, audit says ${r.reason}`);
      }
    }
    out.push("");
    const distinct = s.distinct === undefined ? "" : `, all distinct: ${s.distinct}`;
    out.push(`  deliveries: ${s.deliveries}${distinct}`);
    if (s.listedAfter !== undefined) {
      out.push(
        `  tools/list afterwards: ${s.listedAfter.length === 0 ? "(nothing)" : s.listedAfter.join(", ")}`,
      );
    }
    out.push("");
  });
  process.stdout.write(out.join("\n"));
}
