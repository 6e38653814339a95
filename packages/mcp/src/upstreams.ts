import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { TesseraError } from "@tessera/core";
import { TOOL_NAME, type ToolRules } from "./config.js";
import type { ToolRef } from "./tool-grants.js";
import type { UpstreamInput } from "./types.js";

/** One tool as the gateway exposes it: `server.tool`, with the upstream's definition. */
export interface CatalogEntry extends ToolRef {
  readonly exposedName: string;
  readonly definition: Tool;
  readonly client: Client;
}

export interface Upstreams {
  readonly catalog: ReadonlyMap<string, CatalogEntry>;
  close(): Promise<void>;
}

const GATEWAY_INFO = { name: "tessera-mcp-gateway", version: "0.1.0" };

function transportFor(input: UpstreamInput): Transport {
  if ("transport" in input) return input.transport as unknown as Transport;
  if ("url" in input) {
    return new StreamableHTTPClientTransport(new URL(input.url), {
      requestInit: input.headers === undefined ? undefined : { headers: input.headers },
    });
  }
  return new StdioClientTransport({
    command: input.command,
    args: input.args,
    ...(input.env === undefined ? {} : { env: input.env }),
    ...(input.cwd === undefined ? {} : { cwd: input.cwd }),
    stderr: "inherit",
  });
}

async function listAll(client: Client): Promise<Tool[]> {
  const tools: Tool[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 100; page++) {
    const result = await client.listTools(cursor === undefined ? {} : { cursor });
    tools.push(...result.tools);
    cursor = result.nextCursor;
    if (cursor === undefined) break;
  }
  return tools;
}

/**
 * Connects one SDK client per upstream and reads each one's tools once. A tool whose name is
 * outside MCP's recommended alphabet is not exposed (it could not be a path segment safely), and
 * a binding that names a tool the upstream does not list is a configuration error.
 */
export async function connectUpstreams(
  inputs: Readonly<Record<string, UpstreamInput>>,
  rules: ToolRules,
): Promise<Upstreams> {
  const clients: Client[] = [];
  const catalog = new Map<string, CatalogEntry>();
  const close = async (): Promise<void> => {
    await Promise.allSettled(clients.map((client) => client.close()));
  };
  try {
    for (const [server, input] of Object.entries(inputs)) {
      const client = new Client(GATEWAY_INFO);
      try {
        await client.connect(transportFor(input));
      } catch (error) {
        throw new TesseraError("invalid_config", `upstream ${server} could not be reached`, {
          cause: error,
        });
      }
      clients.push(client);
      const tools = await listAll(client);
      const serverRules = rules[server] ?? {};
      for (const definition of tools) {
        const tool = definition.name;
        if (!TOOL_NAME.test(tool) || tool === "." || tool === "..") continue;
        const exposedName = `${server}.${tool}`;
        catalog.set(exposedName, {
          server,
          tool,
          bind: serverRules[tool]?.bind ?? [],
          exposedName,
          definition: { ...definition, name: exposedName },
          client,
        });
      }
      for (const tool of Object.keys(serverRules)) {
        if (!catalog.has(`${server}.${tool}`)) {
          throw new TesseraError(
            "invalid_config",
            `tools.${server}.${tool}: upstream ${server} lists no such tool`,
          );
        }
      }
    }
  } catch (error) {
    await close();
    throw error;
  }
  return { catalog, close };
}
