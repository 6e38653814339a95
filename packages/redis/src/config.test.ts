import { describe, expect, it } from "vitest";
import { parseRedisUrl } from "./config.js";

const base = "redis://127.0.0.1:6379";

describe("parseRedisUrl", () => {
  it("reads Tessera's options and strips them from the URL handed to ioredis", () => {
    const config = parseRedisUrl(
      `${base}/2?prefix=app1:&claimTtlMs=60000&commandTimeoutMs=300&name=w1&family=4`,
    );
    expect(config).toMatchObject({
      prefix: "app1:",
      claimTtlMs: 60_000,
      commandTimeoutMs: 300,
      connectionName: "w1",
      selfTest: true,
    });
    const url = new URL(config.url);
    expect(url.searchParams.toString()).toBe("family=4");
    expect(url.pathname).toBe("/2");
  });

  it("defaults: prefix tessera:, a claim TTL of days, bounded timeouts", () => {
    const config = parseRedisUrl(base);
    expect(config.prefix).toBe("tessera:");
    expect(config.claimTtlMs).toBeGreaterThanOrEqual(24 * 3600 * 1000);
    expect(config.commandTimeoutMs).toBeGreaterThan(0);
    expect(config.connectTimeoutMs).toBeGreaterThan(0);
  });

  it.each(["", "has space", "star*", "a".repeat(65), "new\nline"])(
    "refuses prefix %j with invalid_config",
    (prefix) => {
      expect(() => parseRedisUrl(`${base}?prefix=${encodeURIComponent(prefix)}`)).toThrow(
        expect.objectContaining({ code: "invalid_config" }),
      );
    },
  );

  it.each(["claimTtlMs=10", "claimTtlMs=abc", "commandTimeoutMs=0", "connectTimeoutMs=2.5"])(
    "refuses %s with invalid_config",
    (param) => {
      expect(() => parseRedisUrl(`${base}?${param}`)).toThrow(
        expect.objectContaining({ code: "invalid_config" }),
      );
    },
  );

  it.each([
    "keyPrefix=other:",
    "enableOfflineQueue=true",
    "maxRetriesPerRequest=20",
    "autoResendUnfulfilledCommands=true",
    "commandTimeout=600000",
    "connectTimeout=600000",
    "retryStrategy=x",
    "lazyConnect=false",
    "connectionName=x",
    "stringNumbers=true",
  ])(
    "refuses the driver option %s, which would override Tessera's own, with invalid_config",
    (param) => {
      for (const url of [`${base}?${param}`, `${base}?cluster=true&prefix={t}:&${param}`]) {
        expect(() => parseRedisUrl(url)).toThrow(
          expect.objectContaining({ code: "invalid_config" }),
        );
      }
    },
  );

  it.each(["postgres://h/db", "sqlite:./x.db", "::"])(
    "refuses %s with unsupported_store_url",
    (url) => {
      expect(() => parseRedisUrl(url)).toThrow(
        expect.objectContaining({ code: "unsupported_store_url" }),
      );
    },
  );

  it("a prefix may open with a hash tag; cluster=true requires one", () => {
    expect(parseRedisUrl(`${base}?prefix=${encodeURIComponent("{acme}:")}`)).toMatchObject({
      prefix: "{acme}:",
      cluster: false,
    });
    const cluster = parseRedisUrl(`${base}?cluster=true&prefix=${encodeURIComponent("{t}:")}`);
    expect(cluster.cluster).toBe(true);
    expect(new URL(cluster.url).search).toBe("");
    for (const bad of ["cluster=true", "cluster=true&prefix=t:", "cluster=yes&prefix=%7Bt%7D:"]) {
      expect(() => parseRedisUrl(`${base}?${bad}`)).toThrow(
        expect.objectContaining({ code: "invalid_config" }),
      );
    }
    for (const prefix of ["{}:", "a{b}:", "{a}{b}", "{a:", "a}"]) {
      expect(() => parseRedisUrl(`${base}?prefix=${encodeURIComponent(prefix)}`)).toThrow(
        expect.objectContaining({ code: "invalid_config" }),
      );
    }
  });

  it("accepts rediss:// (TLS)", () => {
    expect(parseRedisUrl("rediss://h:6380").prefix).toBe("tessera:");
  });

  it("refuses a fragment (the driver would drop it, and what follows it) with invalid_config", () => {
    for (const url of [`${base}#frag`, `${base}#`, `${base}#?selfTest=false`]) {
      expect(() => parseRedisUrl(url), url).toThrow(
        expect.objectContaining({
          code: "invalid_config",
          message: expect.stringContaining("%23"),
        }),
      );
    }
  });

  it("refuses a repeated option, Tessera's or the driver's, with invalid_config naming it, instead of using one of them", () => {
    for (const [query, name] of [
      ["prefix=a:&prefix=b:", "prefix"],
      ["claimTtlMs=1000&claimTtlMs=2000", "claimTtlMs"],
      ["name=a&name=a", "name"],
      ["cluster=false&cluster=true", "cluster"],
      // A driver's setting too: ioredis took the last.
      ["family=4&family=6", "family"],
    ] as const) {
      expect(() => parseRedisUrl(`${base}?${query}`), query).toThrow(
        expect.objectContaining({ code: "invalid_config", message: expect.stringContaining(name) }),
      );
    }
  });

  it("refuses a malformed percent escape in the user name or password with invalid_config", () => {
    // ioredis decodes both with decodeURIComponent: a bare URIError at open, and the CLI's
    // explanation of the failure threw it again.
    for (const url of ["redis://:p%zz@127.0.0.1:6379", "redis://u%zz:p@127.0.0.1:6379/0"]) {
      try {
        parseRedisUrl(url);
        expect.unreachable(url);
      } catch (error) {
        expect(error, url).toMatchObject({ code: "invalid_config" });
        expect((error as Error).message).not.toContain("p%zz");
      }
    }
    expect(parseRedisUrl("redis://:p%25zz@127.0.0.1:6379").url).toBe(
      "redis://:p%25zz@127.0.0.1:6379",
    );
  });
});
