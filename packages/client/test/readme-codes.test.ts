import { readFileSync } from "node:fs";
import { ERROR_CATALOG } from "@tessera/core";
import { describe, expect, it } from "vitest";

const README = readFileSync(new URL("../README.md", import.meta.url), "utf8");

describe("the client README's error codes", () => {
  it("names only codes the service sends (docs/codes.md's catalog)", () => {
    const sentence = /The code is the service's own \(([^)]*)\)/.exec(README)?.[1];
    expect(sentence).toBeDefined();
    const named = [...(sentence ?? "").matchAll(/`([a-z_*]+)`/g)].map((m) => m[1] as string);
    expect(named.length).toBeGreaterThan(3);
    const known = Object.keys(ERROR_CATALOG);
    for (const code of named) {
      const pattern = new RegExp(`^${code.replace("*", "[a-z]+")}$`);
      expect({ code, known: known.some((k) => pattern.test(k)) }).toEqual({ code, known: true });
    }
  });
});
