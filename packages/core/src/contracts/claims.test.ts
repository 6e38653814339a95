import { describe, expect, it } from "vitest";
import { claimKeyDigest } from "./claims.js";

describe("claimKeyDigest", () => {
  it("is a 64-character hex name whatever the input", () => {
    for (const id of ["../../etc/passwd", "a/b", "\u0000", "x".repeat(1 << 20), "ключ", ""]) {
      expect(claimKeyDigest({ session: "s", functionCallId: id })).toMatch(/^[0-9a-f]{64}$/);
    }
  });

  it("keeps (session, ID) pairs apart that concatenate to the same text", () => {
    const a = claimKeyDigest({ session: "ab", functionCallId: "c" });
    const b = claimKeyDigest({ session: "a", functionCallId: "bc" });
    expect(a).not.toBe(b);
  });

  it("keeps IDs apart that differ only in a lone surrogate (UTF-8 would merge them)", () => {
    const high = claimKeyDigest({ session: "s", functionCallId: "id\uD800" });
    const low = claimKeyDigest({ session: "s", functionCallId: "id\uDC00" });
    const replacement = claimKeyDigest({ session: "s", functionCallId: "id\uFFFD" });
    expect(new Set([high, low, replacement]).size).toBe(3);
  });

  it("is stable for the same key", () => {
    const key = { session: "session-1", functionCallId: "call-1" };
    expect(claimKeyDigest(key)).toBe(claimKeyDigest({ ...key }));
  });
});
