import { describe, expect, it } from "vitest";
import type { Principal } from "./config.js";
import { authenticate, tokenDigest } from "./principals.js";

/** The gateway's HTTP face reads the bearer scheme as the service does: any case (RFC 7235). */
const alice = {
  tokenSha256: tokenDigest("token-alice-mcp"),
  namespaceId: "team",
  actor: "asker",
  authority: "host",
} as Principal;

describe("authenticate", () => {
  it("takes the scheme name in any case", () => {
    for (const scheme of ["Bearer", "bearer", "BEARER"]) {
      expect(authenticate([alice], `${scheme} token-alice-mcp`), scheme).toBe(alice);
    }
  });

  it("refuses another scheme, a glued or unknown token, and a bare token in a header", () => {
    for (const header of [
      "Basic token-alice-mcp",
      "bearertoken-alice-mcp",
      "bearer other-token",
      "token-alice-mcp",
      undefined,
    ]) {
      expect(authenticate([alice], header), String(header)).toBeUndefined();
    }
    expect(authenticate([alice], "token-alice-mcp", true)).toBe(alice);
  });
});
