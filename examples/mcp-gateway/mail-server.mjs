// A stdio MCP server with one tool, `send_message { to, text }`, for the desktop set-up in
// docs/mcp.md ("Claude Desktop and IDEs"): the gateway starts it as its `mail` upstream. It
// sends nothing anywhere; it answers `sent to <to>: <text>`, so a run shows what got through.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({ name: "mail", version: "1.0.0" });
server.registerTool(
  "send_message",
  { description: "Sends a message", inputSchema: { to: z.string(), text: z.string() } },
  async ({ to, text }) => ({ content: [{ type: "text", text: `sent to ${to}: ${text}` }] }),
);
await server.connect(new StdioServerTransport());
