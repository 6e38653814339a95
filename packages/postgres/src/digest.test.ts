import { describe, expect, it } from "vitest";
import { digest } from "./digest.js";

describe("digest", () => {
  it("keeps tuples apart that concatenate to the same text", () => {
    expect(digest("a:b", "c")).not.toBe(digest("a", "b:c"));
    expect(digest("ab", "")).not.toBe(digest("a", "b"));
    expect(digest("1:a")).not.toBe(digest("a"));
  });

  it("keeps lone surrogates apart (UTF-8 would map both to U+FFFD)", () => {
    expect(digest("\uD800")).not.toBe(digest("\uDC00"));
    expect(digest("\uD800")).not.toBe(digest("\uFFFD"));
  });

  it("answers the same from its cache as when computed, for short and long inputs", () => {
    const long = "x".repeat(10_000);
    for (const value of ["ns", long, "ns"]) {
      expect(digest(value)).toMatch(/^[0-9a-f]{64}$/);
      expect(digest(value)).toBe(digest(value));
    }
    const before = Array.from({ length: 5000 }, (_, i) => digest(`k${i}`));
    const after = Array.from({ length: 5000 }, (_, i) => digest(`k${i}`));
    expect(after).toEqual(before);
  });
});
