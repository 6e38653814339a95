import { describe, expect, it } from "vitest";
import { AuthorizeRequestSchema, SendMessageRequestSchema } from "./bodies.js";
import { ROUTES } from "./routes.js";

describe("wire contracts", () => {
  it("refuse identity in a body: purpose, namespace and actor come from the token", () => {
    const resource = { namespace: "n", path: ["a"] };
    expect(AuthorizeRequestSchema.safeParse({ action: "read", resource }).success).toBe(true);
    for (const extra of [{ purpose: "p" }, { namespaceId: "n" }, { actor: "a" }]) {
      expect(AuthorizeRequestSchema.safeParse({ action: "read", resource, ...extra }).success).toBe(
        false,
      );
      expect(
        SendMessageRequestSchema.safeParse({ recipient: "r", payload: 1, ...extra }).success,
      ).toBe(false);
    }
  });

  it("name each route once, by method and path", () => {
    const keys = Object.values(ROUTES).map((r) => `${r.method} ${r.path}`);
    expect(new Set(keys).size).toBe(keys.length);
  });
});
