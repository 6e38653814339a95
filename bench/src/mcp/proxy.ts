import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { z } from "zod";
// The gateway's own upstream fetch (internal to @tessera/mcp, not exported): the proxy forwards
// over exactly what the gateway forwards over, so the two rows differ only by Tessera's work.
import { upstreamFetch } from "../../../packages/mcp/dist/http-fetch.js";
import { startUpstream } from "./upstream.js";

/**
 * The SDK alone doing what the gateway does for transport: an SDK `McpServer` over the SDK's
 * Streamable HTTP server transport (JSON answers), whose `echo` tool forwards every call to
 * the upstream with an SDK `Client`, and nothing else (no authentication, claim, decision or
 * audit). Its rate over a direct call is the most any gateway built on the SDK on both sides
 * can reach on this machine, measured rather than assumed.
 */
export async function startProxy(
  upstreamUrl: string,
): Promise<{ url: string; close(): Promise<void> }> {
  const fetcher = upstreamFetch();
  const upstream = new Client({ name: "bench-proxy", version: "1.0.0" });
  await upstream.connect(
    new StreamableHTTPClientTransport(new URL(upstreamUrl), { fetch: fetcher.fetch }),
  );
  const proxy = () => {
    const server = new McpServer({ name: "bench-proxy", version: "1.0.0" });
    server.registerTool("echo", { inputSchema: { text: z.string() } }, async (args) => {
      const result = await upstream.callTool({ name: "echo", arguments: args });
      return result as { content: { type: "text"; text: string }[] };
    });
    return server;
  };
  const served = await startUpstream(proxy);
  return {
    url: served.url,
    close: async () => {
      await served.close();
      await upstream.close();
      fetcher.close();
    },
  };
}
