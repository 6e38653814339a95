import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { parseSqliteUrl } from "./config.js";

function codeOf(action: () => unknown): string | undefined {
  try {
    action();
  } catch (error) {
    return (error as { code?: string }).code;
  }
  return undefined;
}

describe("parseSqliteUrl", () => {
  it("reads relative, absolute, triple-slash and in-memory locations", () => {
    expect(parseSqliteUrl("sqlite:./tessera.db").path).toBe(resolve("tessera.db"));
    expect(parseSqliteUrl("sqlite:/var/lib/t.db").path).toBe("/var/lib/t.db");
    expect(parseSqliteUrl("sqlite:///var/lib/t.db").path).toBe("/var/lib/t.db");
    expect(parseSqliteUrl("sqlite::memory:").path).toBe(":memory:");
    expect(parseSqliteUrl("sqlite:/tmp/with%20space.db").path).toBe("/tmp/with space.db");
  });

  it("defaults to the durable settings", () => {
    expect(parseSqliteUrl("sqlite:./t.db")).toMatchObject({
      synchronous: "FULL",
      busyTimeoutMs: 5000,
      selfTest: true,
      create: true,
    });
  });

  it("takes synchronous, busyTimeoutMs and selfTest from the query", () => {
    expect(
      parseSqliteUrl(
        "sqlite:./t.db?synchronous=normal&busyTimeoutMs=250&selfTest=false&create=false",
      ),
    ).toMatchObject({ synchronous: "NORMAL", busyTimeoutMs: 250, selfTest: false, create: false });
  });

  it("refuses another scheme with unsupported_store_url", () => {
    expect(codeOf(() => parseSqliteUrl("postgres://localhost/db"))).toBe("unsupported_store_url");
    expect(codeOf(() => parseSqliteUrl("./tessera.db"))).toBe("unsupported_store_url");
  });

  it("refuses bad options with invalid_config", () => {
    for (const url of [
      "sqlite:",
      "sqlite:?synchronous=full",
      "sqlite:./t.db?synchronous=off",
      "sqlite:./t.db?busyTimeoutMs=-1",
      "sqlite:./t.db?busyTimeoutMs=1e3",
      "sqlite:./t.db?busyTimeoutMs=600001",
      "sqlite:./t.db?selfTest=no",
      "sqlite:./t.db?create=1",
      "sqlite:./t.db?journal_mode=delete",
    ]) {
      expect(
        codeOf(() => parseSqliteUrl(url)),
        url,
      ).toBe("invalid_config");
    }
  });

  it("refuses a malformed percent escape in the file name with invalid_config", () => {
    // decodeURIComponent threw a bare URIError, which the open reported as store_unavailable.
    for (const url of ["sqlite:/x/a%zz.db", "sqlite:/x/a%.db", "sqlite:./a%e9.db?create=false"]) {
      expect(() => parseSqliteUrl(url), url).toThrow(
        expect.objectContaining({
          code: "invalid_config",
          message: expect.stringContaining("%25"),
        }),
      );
    }
    expect(parseSqliteUrl("sqlite:/x/a%25zz.db").path).toBe("/x/a%zz.db");
  });

  it("refuses a fragment instead of making it part of the file name", () => {
    for (const url of [
      "sqlite:/x/a.db#frag",
      "sqlite:/x/a.db#",
      "sqlite::memory:#frag",
      "sqlite:/x/a.db?create=false#frag",
    ]) {
      expect(() => parseSqliteUrl(url), url).toThrow(
        expect.objectContaining({ code: "invalid_config", message: expect.stringContaining("#") }),
      );
    }
    expect(parseSqliteUrl("sqlite:/x/a%23frag.db").path).toBe("/x/a#frag.db");
  });

  it("refuses a repeated option with invalid_config naming it, instead of using the first", () => {
    for (const [url, name] of [
      ["sqlite:./t.db?synchronous=normal&synchronous=full", "synchronous"],
      ["sqlite:./t.db?synchronous=full&synchronous=full", "synchronous"],
      ["sqlite:./t.db?create=false&busyTimeoutMs=10&create=true", "create"],
      ["sqlite:./t.db?selfTest=true&selfTest=false", "selfTest"],
    ] as const) {
      expect(() => parseSqliteUrl(url), url).toThrow(
        expect.objectContaining({ code: "invalid_config", message: expect.stringContaining(name) }),
      );
    }
  });
});
