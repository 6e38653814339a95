import { describe, expect, it } from "vitest";
import { redact } from "./errors.js";

describe("redact", () => {
  it("shows a plain ID as it is: the UUIDs Tessera mints, a SHA-256 in hex", () => {
    expect(redact("3d451be3-557e-4db8-af19-491a2278e329")).toBe(
      "3d451be3-557e-4db8-af19-491a2278e329",
    );
    const digest = "a".repeat(64);
    expect(redact(digest)).toBe(digest);
    expect(redact("ticket-7:bob@host.example")).toBe("ticket-7:bob@host.example");
  });

  it("labels anything else by its length, never echoing it", () => {
    expect(redact("../etc/passwd")).toBe("<13 chars>");
    expect(redact("a\u0000b")).toBe("<3 chars>");
    expect(redact("a".repeat(65))).toBe("<65 chars>");
    expect(redact("x".repeat(1 << 20))).toBe(`<${1 << 20} chars>`);
    expect(redact("abc\u202edef")).toBe("<7 chars>");
    expect(redact("")).toBe("<0 chars>");
  });
});
