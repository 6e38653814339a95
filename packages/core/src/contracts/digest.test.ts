import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { storageDigest, uniqueStorageDigest } from "./digest.js";

describe("storageDigest", () => {
  it("keeps tuples apart that concatenate to the same text", () => {
    expect(storageDigest("a:b", "c")).not.toBe(storageDigest("a", "b:c"));
    expect(storageDigest("ab", "")).not.toBe(storageDigest("a", "b"));
    expect(storageDigest("1:a")).not.toBe(storageDigest("a"));
  });

  it("keeps lone surrogates apart (UTF-8 would map both to U+FFFD)", () => {
    expect(storageDigest("\uD800")).not.toBe(storageDigest("\uDC00"));
    expect(storageDigest("\uD800")).not.toBe(storageDigest("\uFFFD"));
  });

  it("answers the same from its cache as when computed, for short and long inputs", () => {
    const long = "x".repeat(10_000);
    for (const value of ["ns", long, "ns"]) {
      expect(storageDigest(value)).toMatch(/^[0-9a-f]{64}$/);
      expect(storageDigest(value)).toBe(storageDigest(value));
    }
    const before = Array.from({ length: 5000 }, (_, i) => storageDigest(`k${i}`));
    const after = Array.from({ length: 5000 }, (_, i) => storageDigest(`k${i}`));
    expect(after).toEqual(before);
  });

  it("is SHA-256 over the length-prefixed UTF-16 code units, with or without the cache", () => {
    // Stored keys (marker names, primary keys, Redis keys) are these digests: they must not
    // change between builds.
    const expected = createHash("sha256")
      .update(Buffer.from("7:session2:\uD800x", "utf16le"))
      .digest("hex");
    expect(storageDigest("session", "\uD800x")).toBe(expected);
    expect(uniqueStorageDigest("session", "\uD800x")).toBe(expected);
    expect(uniqueStorageDigest("a", "bc")).toBe(storageDigest("a", "bc"));
    expect(uniqueStorageDigest("a", "bc")).not.toBe(uniqueStorageDigest("ab", "c"));
  });
});
