import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadGatewayConfig, parseGatewayConfig } from "./config.js";

const principal = {
  tokenSha256: "a".repeat(64),
  namespaceId: "acme",
  actor: "alice",
  authority: "host",
};
const valid = {
  upstreams: {
    mail: { command: "node", args: ["mail.js"] },
    web: { url: "http://127.0.0.1:9/mcp" },
  },
  tools: { mail: { send_email: { bind: ["to"] } } },
  principals: [principal],
};

function refusal(value: unknown): string {
  try {
    parseGatewayConfig(value);
  } catch (error) {
    return `${(error as { code: string }).code}: ${(error as Error).message}`;
  }
  return "accepted";
}

describe("the gateway config", () => {
  it("accepts a valid config and fills the limits' defaults", () => {
    const config = parseGatewayConfig(valid);
    expect(config.limits).toEqual({
      maxArgumentBytes: 65_536,
      upstreamTimeoutMs: 30_000,
      maxRecordedResultBytes: 1_048_576,
      restartBackoffMs: 250,
      sessionIdleMs: 1_800_000,
    });
    expect(config.stateless).toBe(false);
  });

  it("names the wrong field in every refusal", () => {
    expect(refusal({ ...valid, upstreams: {} })).toMatch(
      /^invalid_config: .*upstreams: name at least one/,
    );
    expect(refusal({ ...valid, upstreams: { "../x": { command: "n" } } })).toMatch(/upstreams/);
    expect(refusal({ ...valid, upstreams: { mail: { url: "file:///etc/passwd" } } })).toMatch(
      /upstreams\.mail/,
    );
    expect(refusal({ ...valid, tools: { other: { t: {} } } })).toMatch(/tools\.other: no upstream/);
    expect(refusal({ ...valid, tools: { mail: { "a/b": {} } } })).toMatch(/tools\.mail/);
    expect(refusal({ ...valid, tools: { mail: { t: { bind: ["to", "to"] } } } })).toMatch(
      /bound twice/,
    );
    expect(refusal({ ...valid, principals: [{ ...principal, tokenSha256: "x" }] })).toMatch(
      /principals\.0\.tokenSha256/,
    );
    expect(refusal({ ...valid, limits: { maxArgumentBytes: 0 } })).toMatch(
      /limits\.maxArgumentBytes/,
    );
    expect(refusal({ ...valid, extra: 1 })).toMatch(/invalid_config/);
  });

  it("reads a file: missing is file_not_found, not JSON is invalid_config", () => {
    const dir = mkdtempSync(join(tmpdir(), "mcp-config-"));
    expect(() => loadGatewayConfig(join(dir, "none.json"))).toThrow(
      expect.objectContaining({ code: "file_not_found" }),
    );
    writeFileSync(join(dir, "bad.json"), "{");
    expect(() => loadGatewayConfig(join(dir, "bad.json"))).toThrow(
      expect.objectContaining({ code: "invalid_config" }),
    );
    writeFileSync(join(dir, "ok.json"), JSON.stringify(valid));
    expect(loadGatewayConfig(join(dir, "ok.json")).upstreams.mail).toEqual({
      command: "node",
      args: ["mail.js"],
    });
  });
});
