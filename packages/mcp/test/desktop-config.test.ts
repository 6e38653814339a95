import { createHash } from "node:crypto";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { openStores } from "@tessera/core";
import { afterAll, describe, expect, it } from "vitest";
import { CLI } from "./processes.js";

/**
 * docs/mcp.md "Claude Desktop and IDEs", run as a desktop app would: the doc's gateway.json
 * and its `mcpServers` block, taken from the doc as written (only the placeholders it names
 * are replaced), the gateway started from that block's command and args by the official SDK
 * client, in another working directory, with only the block's env (and the SDK's defaults).
 */
const DOC = fileURLToPath(new URL("../../../docs/mcp.md", import.meta.url));
const EXAMPLE = fileURLToPath(
  new URL("../../../examples/mcp-gateway/mail-server.mjs", import.meta.url),
);
const TOKEN = "tsk_desktop-config-test-token-0123456789";

function block(name: string): string {
  const found = new RegExp(`<!-- desktop:${name} -->\\n\`\`\`json\\n([\\s\\S]*?)\`\`\``).exec(
    readFileSync(DOC, "utf8"),
  );
  if (found === null) throw new Error(`docs/mcp.md has no desktop:${name} block`);
  return found[1] as string;
}

const dirs: string[] = [];
const clients: Client[] = [];
afterAll(async () => {
  await Promise.allSettled(clients.map((client) => client.close()));
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const textOf = (result: unknown) =>
  ((result as { content: { text: string }[] }).content[0] as { text: string }).text;

describe("docs/mcp.md desktop config", () => {
  it("starts from its mcpServers block in another directory and gates the example server", async () => {
    const folder = mkdtempSync(join(tmpdir(), "tessera-mcp-desktop-"));
    const elsewhere = mkdtempSync(join(tmpdir(), "tessera-mcp-app-"));
    dirs.push(folder, elsewhere);
    // The example server, "put in the folder": it resolves its SDK from the repository.
    writeFileSync(
      join(folder, "mail-server.mjs"),
      `await import(${JSON.stringify(pathToFileURL(EXAMPLE).href)});\n`,
    );
    // `tessera` as installed: an executable file at an absolute path.
    const tessera = join(folder, "tessera");
    writeFileSync(tessera, `#!/bin/sh\nexec "${process.execPath}" "${CLI}" "$@"\n`);
    chmodSync(tessera, 0o755);

    const digest = createHash("sha256").update(TOKEN).digest("hex");
    writeFileSync(
      join(folder, "gateway.json"),
      block("gateway").replace("<sha256 of the token>", digest),
    );
    mkdirSync(join(folder, "tessera-data"));
    const stores = await openStores(`sqlite:${join(folder, "tessera-data", "tessera.db")}`);
    await stores.grants.add({
      id: "ticket-bob",
      namespaceId: "default",
      issuer: "host",
      subject: "agent",
      capabilities: [
        {
          resource: { namespace: "mcp", path: ["mail", "send_message", "bob"] },
          actions: ["tools/call"],
          scope: "exact",
        },
      ],
      constraints: { maxUses: 1 },
      issuedAt: "2020-01-01T00:00:00.000Z",
    });
    await stores.close();

    const desktop = JSON.parse(
      block("mcpServers")
        .replaceAll("/path/to/tessera-mcp", folder)
        .replaceAll("/path/to/tessera", tessera)
        .replace("tsk_…", TOKEN),
    ) as {
      mcpServers: { tessera: { command: string; args: string[]; env: Record<string, string> } };
    };
    const { command, args, env } = desktop.mcpServers.tessera;
    const client = new Client({ name: "desktop", version: "1.0.0" });
    clients.push(client);
    await client.connect(new StdioClientTransport({ command, args, env, cwd: elsewhere }));

    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name)).toEqual(["mail.send_message"]);
    const sent = await client.callTool({
      name: "mail.send_message",
      arguments: { to: "bob", text: "hi" },
    });
    expect({ isError: sent.isError ?? false, text: textOf(sent) }).toEqual({
      isError: false,
      text: "sent to bob: hi",
    });
    const again = await client.callTool({
      name: "mail.send_message",
      arguments: { to: "bob", text: "hi again" },
    });
    expect({ isError: again.isError, text: textOf(again) }).toEqual({
      isError: true,
      text: expect.stringContaining("tool_unavailable"),
    });
  }, 60_000);
});
