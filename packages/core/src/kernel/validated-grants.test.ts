import { describe, expect, it } from "vitest";
import { messageSendCapability } from "../contracts/messages.js";
import { type Grant, GrantSchema } from "../contracts/schemas.js";
import { isSealedGrant, sealValidatedGrant } from "./validated-grants.js";

const parsed = (): Grant =>
  GrantSchema.parse({
    id: "g1",
    namespaceId: "ns",
    issuer: "host",
    subject: "asker",
    capabilities: [messageSendCapability("a", "alice")],
    constraints: { maxUses: 1, purposes: ["review"] },
    issuedAt: "2026-01-01T00:00:00.000Z",
  });

describe("sealed grants", () => {
  it("a sealed grant is deeply frozen and known as sealed; a fresh parse is not", () => {
    const fresh = parsed();
    expect(isSealedGrant(fresh)).toBe(false);
    const sealed = sealValidatedGrant(fresh);
    expect(sealed).toBe(fresh);
    expect(isSealedGrant(sealed)).toBe(true);
    for (const part of [
      sealed,
      sealed.constraints,
      sealed.constraints.purposes,
      sealed.capabilities,
      sealed.capabilities[0],
      sealed.capabilities[0]?.resource,
      sealed.capabilities[0]?.resource.path,
      sealed.capabilities[0]?.actions,
    ]) {
      expect(Object.isFrozen(part)).toBe(true);
    }
  });

  it("the seal is invisible: keys, JSON and equality read as the parsed grant", () => {
    const sealed = sealValidatedGrant(parsed());
    expect(Object.keys(sealed)).toEqual(Object.keys(parsed()));
    expect(Reflect.ownKeys(sealed)).toEqual(Object.keys(parsed()));
    expect(JSON.stringify(sealed)).toBe(JSON.stringify(parsed()));
    expect(sealed).toEqual(parsed());
  });

  it("nothing else passes as sealed: a copy, a clone, a proxy, a spread, primitives", () => {
    const sealed = sealValidatedGrant(parsed());
    for (const other of [
      structuredClone(sealed),
      JSON.parse(JSON.stringify(sealed)),
      { ...sealed },
      new Proxy(sealed, {}),
      Object.create(sealed),
      null,
      undefined,
      "g1",
      1,
    ]) {
      expect(isSealedGrant(other)).toBe(false);
    }
  });

  it("sealing a sealed grant again changes nothing and does not throw", () => {
    const sealed = sealValidatedGrant(parsed());
    expect(sealValidatedGrant(sealed)).toBe(sealed);
    expect(isSealedGrant(sealed)).toBe(true);
  });
});
