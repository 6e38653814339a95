import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseSqliteUrl } from "@tessera/sqlite";
import { describe, expect, it } from "vitest";
import { type GatewayConfig, loadGatewayConfig, parseGatewayConfig } from "./config.js";
import { existingStore } from "./config-paths.js";

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

  it("names every problem in one refusal, the schema's and the cross-field ones, ; -separated", () => {
    const both = refusal({
      ...valid,
      tools: { mail: { send_email: { bind: ["x", "x"] } }, zz: { a: {} } },
    });
    expect(both).toMatch(/^invalid_config: /);
    expect(both).toContain("tools.mail.send_email.bind: an argument is bound twice");
    expect(both).toContain("tools.zz: no upstream of that name");
    expect(both.split("; ")).toHaveLength(2);
    const all = refusal({
      ...valid,
      principals: [],
      tools: { zz: { a: { bind: ["x", "x"] } } },
      limits: { maxArgumentBytes: 0 },
    });
    for (const field of [
      "limits.maxArgumentBytes",
      "principals:",
      "tools.zz:",
      "tools.zz.a.bind",
    ]) {
      expect(all).toContain(field);
    }
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
      cwd: dir,
    });
  });

  it("resolves the file's paths against its folder, not the working directory", () => {
    const dir = mkdtempSync(join(tmpdir(), "mcp-config-"));
    const write = (stores: string | undefined, cwd?: string): GatewayConfig => {
      const file = join(dir, "gateway.json");
      const mail = { command: "node", args: ["mail.js"], ...(cwd === undefined ? {} : { cwd }) };
      writeFileSync(
        file,
        JSON.stringify({ ...valid, upstreams: { ...valid.upstreams, mail }, stores }),
      );
      return loadGatewayConfig(file);
    };
    // A stdio upstream runs in the folder, so `node mail.js` finds the folder's mail.js.
    expect(write(undefined).upstreams.mail).toMatchObject({ cwd: dir });
    expect(write(undefined, "servers").upstreams.mail).toMatchObject({ cwd: join(dir, "servers") });
    expect(write(undefined, "/srv/mail").upstreams.mail).toMatchObject({ cwd: "/srv/mail" });
    expect(write(undefined).upstreams.web).toEqual({ url: "http://127.0.0.1:9/mcp" });
    expect(write("sqlite:./mcp.db").stores).toBe(`sqlite:${join(dir, "mcp.db")}`);
    expect(write("sqlite:data/mcp.db?synchronous=normal").stores).toBe(
      `sqlite:${join(dir, "data", "mcp.db")}?synchronous=normal`,
    );
    expect(write("sqlite:/var/mcp.db").stores).toBe("sqlite:/var/mcp.db");
    expect(write("sqlite:///var/mcp.db").stores).toBe("sqlite:///var/mcp.db");
    expect(write("sqlite::memory:").stores).toBe("sqlite::memory:");
    expect(write("postgres://db/t").stores).toBe("postgres://db/t");
    // Data given to parseGatewayConfig has no folder: the host's working directory applies.
    expect(parseGatewayConfig(valid).upstreams.mail).toEqual({
      command: "node",
      args: ["mail.js"],
    });
  });

  it("a folder whose name holds %, ? or # stays one path in the store URL", () => {
    // `#` too: the SQLite backend now refuses a fragment, so an unescaped one refused the store.
    const dir = mkdtempSync(join(tmpdir(), "mcp-config-%41?x#1-"));
    const file = join(dir, "gateway.json");
    writeFileSync(file, JSON.stringify({ ...valid, stores: "sqlite:mcp.db?create=false" }));
    const stores = loadGatewayConfig(file).stores as string;
    const location = stores.slice("sqlite:".length, stores.lastIndexOf("?"));
    expect(decodeURIComponent(location)).toBe(join(dir, "mcp.db"));
    expect(location).not.toContain("#");
    expect(stores.endsWith("?create=false")).toBe(true);
    expect(parseSqliteUrl(stores).path).toBe(join(dir, "mcp.db"));
  });
});

describe("the store a config opens", () => {
  it("a missing sqlite file is refused with its path and tessera init; an existing one opens without create", () => {
    const dir = mkdtempSync(join(tmpdir(), "mcp-store-"));
    const missing = join(dir, "mcp.db");
    expect(() => existingStore(`sqlite:${missing}`)).toThrow(
      expect.objectContaining({
        code: "store_unavailable",
        message: expect.stringMatching(new RegExp(`${missing}.*tessera init`)),
      }),
    );
    expect(existsSync(missing)).toBe(false);
    // Creating it is the URL's own decision, said in words.
    expect(existingStore(`sqlite:${missing}?create=true`)).toBe(`sqlite:${missing}?create=true`);
    writeFileSync(missing, "");
    expect(existingStore(`sqlite:${missing}`)).toBe(`sqlite:${missing}?create=false`);
    expect(existingStore(`sqlite:${missing}?synchronous=normal`)).toBe(
      `sqlite:${missing}?synchronous=normal&create=false`,
    );
    expect(existingStore("sqlite::memory:")).toBe("sqlite::memory:");
    expect(existingStore("redis://127.0.0.1:6379")).toBe("redis://127.0.0.1:6379");
  });
});
