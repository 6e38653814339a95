import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { BIN, scratch } from "./support/cli.js";

const TOKEN = "serve-logs-agent-token-0123456789";
const PAYLOAD = "SERVE-LOGS-SECRET-PAYLOAD";

/** `tessera serve` on its own port: a health probe and a send, then stopped; both streams. */
async function served(...extra: string[]): Promise<{ stdout: string; stderr: string }> {
  const dir = scratch();
  const principals = join(dir, "principals.json");
  writeFileSync(
    principals,
    JSON.stringify({
      principals: [
        {
          tokenSha256: createHash("sha256").update(TOKEN).digest("hex"),
          namespaceId: "team",
          actor: "agent",
          authority: "host",
        },
      ],
    }),
    { mode: 0o600 },
  );
  const child = spawn(process.execPath, [
    BIN,
    "serve",
    "--store",
    `sqlite:${join(dir, "s.db")}`,
    "--principals",
    principals,
    "--port",
    "0",
    ...extra,
  ]);
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once("close", resolve));
  const url = await new Promise<string>((resolve, reject) => {
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
      const found = /listening on (http:\S+)/.exec(stderr)?.[1];
      if (found) resolve(found);
    });
    child.once("close", (code) => reject(new Error(`serve exited ${code}: ${stderr}`)));
  });
  try {
    await fetch(`${url}/healthz`);
    const sent = await fetch(`${url}/v1/messages`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ recipient: "bob", payload: { text: PAYLOAD }, callId: "c-1" }),
    });
    expect(await sent.json()).toEqual({ status: "denied", code: "tool_unavailable" });
  } catch (error) {
    // A failed step must not leave the service running after the test.
    child.kill("SIGKILL");
    throw error;
  }
  child.kill("SIGTERM");
  expect(await exited).toBe(0);
  return { stdout, stderr };
}

const parsed = (stdout: string) =>
  stdout
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as Record<string, unknown>);

describe("tessera serve's output", () => {
  it("holds only JSON on stdout: one line per decision, the probe not at info, text on stderr", async () => {
    const { stdout, stderr } = await served();
    const lines = parsed(stdout); // throws on any line that is not JSON
    expect(stderr).toContain("tessera serve: listening on");
    expect(stderr).toContain("warning: no webhooks configured");
    expect(lines.filter((l) => l.msg === "decision")).toEqual([
      expect.objectContaining({
        level: 30,
        callId: "c-1",
        principal: { namespaceId: "team", actor: "agent", authority: "host" },
        action: "messages.send",
        outcome: "denied",
        code: "tool_unavailable",
        reason: "no_transport",
        traceId: expect.any(String),
        latencyMs: expect.any(Number),
      }),
    ]);
    expect(stdout).not.toContain("/healthz");
    expect(stdout).not.toContain(PAYLOAD);
    expect(stdout + stderr).not.toContain(TOKEN);
  });

  it("writes health probes at --log-level debug", async () => {
    const { stdout } = await served("--log-level", "debug");
    const probe = parsed(stdout).filter(
      (l) => (l.req as { url?: string } | undefined)?.url === "/healthz",
    );
    expect(probe).toEqual([expect.objectContaining({ level: 20, msg: "request" })]);
  });
});
