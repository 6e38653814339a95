import type { ClaimReader } from "@tessera/core";
import { expect } from "vitest";

/**
 * What a claim reader (`openClaimReader`) must do with a store whose session `s` holds one
 * claim in doubt, `open`, claimed with body hash `h`: list it, read it, and offer nothing but
 * `get`, `listInDoubt` and `close` (no way to write).
 */
export async function expectClaimReaderReads(reader: ClaimReader): Promise<void> {
  expect((await reader.listInDoubt("s")).map((c) => c.functionCallId)).toEqual(["open"]);
  expect((await reader.get({ session: "s", functionCallId: "open" }))?.bodyHash).toBe("h");
  expect(Object.keys(reader).sort()).toEqual(["close", "get", "listInDoubt"]);
}
