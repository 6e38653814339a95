import { describe, expect, it } from "vitest";
import { InMemoryGrantStore, isTesseraError } from "../index.js";
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

describe("a malformed grant is refused naming its field", () => {
  /** The `invalid_grant` message adding `grant` to a store answers with. */
  async function refusalOf(grant: unknown): Promise<string> {
    try {
      await new InMemoryGrantStore().add(grant as typeof input);
    } catch (error) {
      if (isTesseraError(error, "invalid_grant")) return error.message;
      throw error;
    }
    throw new Error("a malformed grant was added");
  }

  it("names the path of the first issue, as deriveGrant does", async () => {
    const [capability] = input.capabilities;
    // Before: "the grant does not match the grant schema", whatever the field.
    expect(
      await refusalOf({ ...input, capabilities: [{ ...capability, actions: "send" }] }),
    ).toMatch(/^the grant does not match the grant schema: capabilities\.0\.actions: \S/);
    expect(await refusalOf({ ...input, subject: "" })).toMatch(/ schema: subject: \S/);
    expect(await refusalOf({ ...input, extra: 1 })).toBe(
      "the grant does not match the grant schema: (root): unrecognized key extra",
    );
    expect(await refusalOf("not a grant")).toMatch(/ schema: \(root\): \S/);
  });

  it("redacts the caller's text in the path and in an unrecognized key", async () => {
    const hostile = "\u202eevil\u0000".repeat(2);
    expect(await refusalOf({ ...input, [hostile]: 1 })).toBe(
      "the grant does not match the grant schema: (root): unrecognized key <12 chars>",
    );
    const message = await refusalOf({ ...input, constraints: { [hostile]: 1 } });
    expect(message).toBe(
      "the grant does not match the grant schema: constraints: unrecognized key <12 chars>",
    );
    expect(message).not.toContain("evil");
  });
});
