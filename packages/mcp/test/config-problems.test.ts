import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadGatewayConfig } from "../src/config.js";
import { CLI } from "./processes.js";
import { PRINCIPALS, UPSTREAM } from "./support.js";

function closedPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      probe.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

describe("tessera mcp at start", () => {
  it("names every problem in one run: an unreachable upstream with its URL and cause, and a binding no upstream lists", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tessera-mcp-problems-"));
    const port = await closedPort();
    const config = join(dir, "gateway.json");
    writeFileSync(
      config,
      JSON.stringify({
        upstreams: {
          search: { url: `http://user:pw@127.0.0.1:${port}/mcp?key=secret` },
          messages: { command: process.execPath, args: [UPSTREAM] },
        },
        tools: { messages: { no_such_tool: { bind: ["to"] } } },
        principals: PRINCIPALS,
        stores: `sqlite:${join(dir, "mcp.db")}?create=true`,
      }),
    );
    const run = spawnSync(process.execPath, [CLI, "mcp", "--config", config, "--port", "0"], {
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(run.status).toBe(2);
    expect(run.stderr).toContain(
      `upstream search (http://127.0.0.1:${port}/mcp) could not be reached: `,
    );
    expect(run.stderr).toContain(`ECONNREFUSED 127.0.0.1:${port}`);
    expect(run.stderr).toContain(
      "tools.messages.no_such_tool: upstream messages lists no such tool",
    );
    expect(run.stderr).not.toContain("secret");
    expect(run.stderr).not.toContain("pw@");
  });

  it("refuses a config that group or others may write: it names who is let in", () => {
    const dir = mkdtempSync(join(tmpdir(), "tessera-mcp-mode-"));
    const config = join(dir, "gateway.json");
    writeFileSync(
      config,
      JSON.stringify({
        upstreams: { messages: { command: process.execPath, args: [UPSTREAM] } },
        principals: PRINCIPALS,
        stores: "memory:",
      }),
    );
    for (const mode of [0o666, 0o620, 0o602]) {
      chmodSync(config, mode);
      expect(() => loadGatewayConfig(config)).toThrowError(
        expect.objectContaining({
          code: "invalid_config",
          message: expect.stringContaining(`is mode 0${mode.toString(8)}: others may change`),
        }),
      );
    }
    for (const mode of [0o644, 0o600, 0o400]) {
      chmodSync(config, mode);
      expect(loadGatewayConfig(config).principals).toHaveLength(PRINCIPALS.length);
    }
  });
});
