import { describe, expect, it } from "vitest";
import { parsePostgresUrl } from "./config.js";

const base = "postgres://postgres@127.0.0.1:5432/test";

describe("parsePostgresUrl", () => {
  it("reads Tessera's options and strips them from the URL handed to pg", () => {
    const config = parsePostgresUrl(
      `${base}?schema=run_1&poolMax=4&statementTimeoutMs=900&application_name=w1&sslmode=disable`,
    );
    expect(config).toMatchObject({
      schema: "run_1",
      poolMax: 4,
      statementTimeoutMs: 900,
      applicationName: "w1",
      selfTest: true,
    });
    expect(new URL(config.connectionString).searchParams.toString()).toBe("sslmode=disable");
  });

  it("has defaults: schema tessera, bounded timeouts", () => {
    const config = parsePostgresUrl(base);
    expect(config.schema).toBe("tessera");
    expect(config.connectTimeoutMs).toBeGreaterThan(0);
    expect(config.statementTimeoutMs).toBeGreaterThan(0);
    expect(config.idleTimeoutMs).toBeGreaterThan(0);
  });

  it.each([
    'x"; drop schema public; --',
    "Upper",
    "has space",
    "a".repeat(64),
    "1starts_with_digit",
  ])("refuses schema %j (it is quoted into DDL) with invalid_config", (schema) => {
    expect(() => parsePostgresUrl(`${base}?schema=${encodeURIComponent(schema)}`)).toThrow(
      expect.objectContaining({ code: "invalid_config" }),
    );
  });

  it("never echoes a hostile schema name in the message", () => {
    try {
      parsePostgresUrl(`${base}?schema=${encodeURIComponent("'; drop table x; --")}`);
      expect.unreachable();
    } catch (error) {
      expect((error as Error).message).not.toContain("drop table");
    }
  });

  it.each(["poolMax=0", "poolMax=abc", "statementTimeoutMs=-1", "connectTimeoutMs=1.5"])(
    "refuses %s with invalid_config",
    (param) => {
      expect(() => parsePostgresUrl(`${base}?${param}`)).toThrow(
        expect.objectContaining({ code: "invalid_config" }),
      );
    },
  );

  it.each(["redis://127.0.0.1:6379", "sqlite:./x.db", "not a url"])(
    "refuses %s with unsupported_store_url",
    (url) => {
      expect(() => parsePostgresUrl(url)).toThrow(
        expect.objectContaining({ code: "unsupported_store_url" }),
      );
    },
  );

  it("accepts postgresql:// too", () => {
    expect(parsePostgresUrl("postgresql://h/db").schema).toBe("tessera");
  });

  it("refuses a fragment (the driver would drop it, and what follows it) with invalid_config", () => {
    for (const url of [`${base}#frag`, `${base}#`, `${base}#?selfTest=false`]) {
      expect(() => parsePostgresUrl(url), url).toThrow(
        expect.objectContaining({
          code: "invalid_config",
          message: expect.stringContaining("%23"),
        }),
      );
    }
  });

  it("refuses a repeated option, Tessera's or the driver's, with invalid_config naming it, instead of using one of them", () => {
    for (const [query, name] of [
      ["schema=a&schema=b", "schema"],
      ["poolMax=2&sslmode=disable&poolMax=3", "poolMax"],
      ["application_name=x&application_name=x", "application_name"],
      ["selfTest=true&selfTest=false", "selfTest"],
      // A driver's setting too: pg took the last, so this connected without TLS.
      ["sslmode=require&sslmode=disable", "sslmode"],
    ] as const) {
      expect(() => parsePostgresUrl(`${base}?${query}`), query).toThrow(
        expect.objectContaining({ code: "invalid_config", message: expect.stringContaining(name) }),
      );
    }
  });
});
