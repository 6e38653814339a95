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
});
