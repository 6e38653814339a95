import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { openStores } from "@tessera/core";
import { PRINCIPALS, toolGrant, UPSTREAM } from "./support.js";

/** The `tessera` command as built: tests drive the real gateway process. */
export const CLI = fileURLToPath(new URL("../../cli/dist/bin.js", import.meta.url));

/** A gateway config in front of the counting upstream (spawned by the gateway over stdio). */
export function writeConfig(
  dir: string,
  stores: string,
  countFile: string,
  extra: Record<string, unknown> = {},
): string {
  const file = join(dir, `gateway-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(
    file,
    JSON.stringify({
      upstreams: {
        messages: {
          command: process.execPath,
          args: [UPSTREAM],
          env: { COUNT_FILE: countFile, PATH: process.env.PATH ?? "" },
        },
      },
      tools: { messages: { send_message: { bind: ["to"] } } },
      principals: PRINCIPALS,
      stores,
      ...extra,
    }),
  );
  return file;
}

/**
 * A new folder holding a SQLite store where alice may call the upstream's `messages.slow`, and
 * a config for it whose upstream counts its calls in `countFile`: what the signal tests stop.
 */
export async function slowToolSetup(
  prefix: string,
): Promise<{ dir: string; config: string; countFile: string }> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const countFile = join(dir, "count.jsonl");
  const store = `sqlite:${join(dir, "mcp.db")}`;
  const stores = await openStores(`${store}?create=true`);
  await stores.grants.add(toolGrant("alice", ["messages", "slow"]));
  await stores.close();
  return { dir, config: writeConfig(dir, store, countFile), countFile };
}

export interface GatewayProcess {
  readonly url: string;
  readonly child: ChildProcess;
  /** SIGTERM, then waits for the exit. */
  stop(): Promise<void>;
}

/** `tessera mcp --config FILE --port 0 --json`, resolved once it prints its URL. */
export function spawnGateway(config: string): Promise<GatewayProcess> {
  const child = spawn(process.execPath, [CLI, "mcp", "--config", config, "--port", "0", "--json"], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const exited = new Promise<void>((resolve) => child.once("close", () => resolve()));
  return new Promise((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`gateway did not start: ${stderr}`)), 30_000);
    child.stdout?.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const line = out.split("\n").find((l) => l.includes('"listening"'));
      if (line === undefined) return;
      clearTimeout(timer);
      const { url } = JSON.parse(line) as { url: string };
      resolve({
        url,
        child,
        stop: async () => {
          if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
          await exited;
        },
      });
    });
    child.once("close", (code) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited ${code}: ${stderr}`));
    });
  });
}

/**
 * The official client over stdio to `tessera mcp --stdio` as the principal of `token`, started
 * in `cwd` (as a desktop app starts it, from wherever it runs) when given.
 */
export async function stdioClient(config: string, token: string, cwd?: string): Promise<Client> {
  const client = new Client({ name: "stdio-test", version: "1.0.0" });
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [CLI, "mcp", "--config", config, "--stdio"],
      env: { PATH: process.env.PATH ?? "", TESSERA_MCP_TOKEN: token },
      stderr: "pipe",
      ...(cwd === undefined ? {} : { cwd }),
    }),
  );
  return client;
}
