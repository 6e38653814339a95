import { describe, expect, it } from "vitest";
import { isSealedGrant, sealValidatedGrant } from "../kernel/validated-grants.js";
import { messageSendCapability } from "./messages.js";
import { GrantSchema } from "./schemas.js";
import { parseGrantInput } from "./store-input.js";

const input = {
  id: "g1",
  namespaceId: "ns",
  issuer: "host",
  subject: "asker",
  capabilities: [messageSendCapability("a", "alice")],
  constraints: { maxUses: 1 },
  issuedAt: "2026-01-01T00:00:00.000Z",
};

describe("parseGrantInput and sealed grants", () => {
  it("hands a sealed grant back as it is: it is valid and frozen already", () => {
    const sealed = sealValidatedGrant(GrantSchema.parse(input));
    expect(parseGrantInput(sealed)).toBe(sealed);
  });

  it("parses a look-alike of a sealed grant: identity is the proof, not shape", () => {
    const sealed = sealValidatedGrant(GrantSchema.parse(input));
    const copy = structuredClone(sealed);
    const parsed = parseGrantInput(copy);
    expect(parsed).not.toBe(copy);
    expect(parsed).toEqual(sealed);
    expect(isSealedGrant(copy)).toBe(false);
  });

  it("refuses a look-alike that breaks the schema, however like a sealed grant it is", () => {
    const sealed = sealValidatedGrant(GrantSchema.parse(input));
    const forged = {
      ...structuredClone(sealed),
      capabilities: [messageSendCapability("..", "alice")],
    };
    expect(() => parseGrantInput(forged)).toThrow(
      expect.objectContaining({ code: "invalid_grant" }),
    );
  });
});
