import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { openStores } from "@tessera/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLI, stdioClient } from "./processes.js";
import { ALICE_TOKEN, PRINCIPALS, readCounts, textOf, toolGrant, UPSTREAM } from "./support.js";

/**
 * `tessera mcp --config /abs/gateway.json --stdio` started as a desktop app starts MCP servers:
 * from another working directory. The config's relative paths are its folder's; the store is
 * never created where the process happens to run.
 */
let dir: string;
let elsewhere: string;
const clients: Client[] = [];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "tessera-mcp-folder-"));
  elsewhere = mkdtempSync(join(tmpdir(), "tessera-mcp-cwd-"));
  // The upstream as a user keeps it: a script beside the config, named relatively.
  writeFileSync(
    join(dir, "mail-server.mjs"),
    `await import(${JSON.stringify(pathToFileURL(UPSTREAM).href)});\n`,
  );
});

afterAll(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  rmSync(dir, { recursive: true, force: true });
  rmSync(elsewhere, { recursive: true, force: true });
});

function writeConfig(name: string, stores: string): string {
  const file = join(dir, name);
  writeFileSync(
    file,
    JSON.stringify({
      upstreams: {
        mail: {
          command: process.execPath,
          args: ["mail-server.mjs"],
          env: { COUNT_FILE: "count.jsonl", PATH: process.env.PATH ?? "" },
        },
      },
      principals: PRINCIPALS,
      stores,
    }),
  );
  return file;
}

describe("a gateway config's paths", () => {
  it("are its folder's: the upstream is found and the provisioned store is the one used", async () => {
    const stores = await openStores(`sqlite:${join(dir, "mcp.db")}`);
    await stores.grants.add(toolGrant("alice", ["mail", "echo"]));
    await stores.close();
    const config = writeConfig("gateway.json", "sqlite:./mcp.db");

    const client = await stdioClient(config, ALICE_TOKEN, elsewhere);
    clients.push(client);
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual(["mail.echo"]);
    const result = await client.callTool({ name: "mail.echo", arguments: { text: "hi" } });
    expect(textOf(result)).toBe("hi");
    // The upstream ran in the config's folder (its relative COUNT_FILE landed there).
    expect(readCounts(join(dir, "count.jsonl"), "echo")).toBe(1);
    await client.close();

    // The claim of that call is in the folder's database.
    const reopened = await openStores(`sqlite:${join(dir, "mcp.db")}?create=false`);
    const events = await reopened.audit.read();
    await reopened.close();
    expect(events.filter((e) => e.action === "tools/call")).toHaveLength(1);
    expect(readdirSync(elsewhere)).toEqual([]);
  });

  it("a missing store is an error naming its path and tessera init; nothing is created", async () => {
    const config = writeConfig("missing.json", "sqlite:missing.db");
    const child = spawn(process.execPath, [CLI, "mcp", "--config", config, "--stdio"], {
      cwd: elsewhere,
      env: { PATH: process.env.PATH ?? "", TESSERA_MCP_TOKEN: ALICE_TOKEN },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const code = await new Promise<number | null>((resolve) => child.once("close", resolve));
    expect(code).not.toBe(0);
    expect(stderr).toContain(join(dir, "missing.db"));
    expect(stderr).toContain("tessera init");
    expect(readdirSync(dir)).not.toContain("missing.db");
    expect(readdirSync(elsewhere)).toEqual([]);
  });
});
