import { InMemoryClaimStore, isTesseraError } from "@tessera/core";
import { describe, expect, it } from "vitest";
import { CATALOG_ID, callMessage, TEST_CATALOG } from "../../test/fixtures/catalog.js";
import {
  correlatedId,
  countingClaims,
  errorCode,
  expectValidReply,
  setup,
} from "../../test/fixtures/gate-setup.js";
import { FunctionCallGate } from "./gate.js";
import type { FunctionCallGateOptions } from "./types.js";

/** A catalog with one agent-callable `add`, under its own ID. */
function catalogNamed(catalogId: string) {
  return { ...TEST_CATALOG, catalogId };
}

const BASIC = "https://a2ui.org/specification/v1_0/catalogs/basic.json";
const SHOP = "https://example.com/catalogs/shop";

function configError(options: Partial<FunctionCallGateOptions>): string | undefined {
  try {
    new FunctionCallGate({
      claims: new InMemoryClaimStore(),
      invoke: () => 1,
      ...options,
    } as FunctionCallGateOptions);
  } catch (error) {
    if (isTesseraError(error)) return `${error.code}: ${error.message}`;
    throw error;
  }
  return undefined;
}

describe("FunctionCallGate with several catalogs", () => {
  it("calls into each of three catalogs are allowed, and the callback learns which", async () => {
    const { gate, calls } = setup({
      catalog: undefined,
      catalogs: [TEST_CATALOG, catalogNamed(BASIC), catalogNamed(SHOP)],
    });
    for (const [i, catalogId] of [CATALOG_ID, BASIC, SHOP].entries()) {
      const result = await gate.handle("s", callMessage(`c${i}`, { a: i, b: 1 }, "add", catalogId));
      expectValidReply(result);
      expect(result.receipt.status).toBe("dispatched");
    }
    expect(calls.map((c) => c.catalogId)).toEqual([CATALOG_ID, BASIC, SHOP]);
  });

  it("each catalog's own rules apply to calls into it", async () => {
    const narrow = {
      catalogId: SHOP,
      functions: { add: { ...TEST_CATALOG.functions.add, allowedCallers: "rendererOnly" } },
    };
    const { gate, calls } = setup({ catalog: undefined, catalogs: [TEST_CATALOG, narrow] });
    const refused = await gate.handle("s", callMessage("n", { a: 1, b: 1 }, "add", SHOP));
    expect(refused.receipt).toMatchObject({ status: "denied", reason: "caller_not_allowed" });
    const allowed = await gate.handle("s", callMessage("w", { a: 1, b: 1 }, "add", CATALOG_ID));
    expect(allowed.receipt.status).toBe("dispatched");
    expect(calls).toHaveLength(1);
  });

  it("a catalog none of them serves is refused before the claim: no claim is made", async () => {
    const claims = countingClaims(new InMemoryClaimStore());
    const { gate, calls, audit } = setup({
      claims,
      catalog: undefined,
      catalogs: [TEST_CATALOG, catalogNamed(BASIC), catalogNamed(SHOP)],
    });
    const result = await gate.handle(
      "s",
      callMessage("u", { a: 1, b: 1 }, "add", "https://other.test/catalog"),
    );
    expectValidReply(result);
    expect(errorCode(result)).toBe("INVALID_FUNCTION_CALL");
    expect(correlatedId(result)).toBe("u");
    expect(result.receipt).toMatchObject({ status: "denied", reason: "unknown_catalog" });
    expect(audit.events[0]).toMatchObject({ reason: "unknown_catalog" });
    expect(claims.claimCalls).toBe(0);
    expect(calls).toHaveLength(0);
  });

  it("`catalog` stays a shorthand for a list of one", async () => {
    const { gate } = setup({ catalog: catalogNamed(SHOP) });
    expect((await gate.handle("s", callMessage("1", { a: 1, b: 1 }, "add", SHOP))).receipt).toEqual(
      expect.objectContaining({ status: "dispatched" }),
    );
    expect(
      (await gate.handle("s", callMessage("2", { a: 1, b: 1 }, "add", CATALOG_ID))).receipt,
    ).toMatchObject({ status: "denied", reason: "unknown_catalog" });
  });

  it.each([
    [
      "both catalog and catalogs",
      { catalog: TEST_CATALOG, catalogs: [catalogNamed(SHOP)] },
      /not both/,
    ],
    ["neither", {}, /at least one catalog/],
    ["an empty list", { catalogs: [] }, /at least one catalog/],
    ["catalogs that is not a list", { catalogs: TEST_CATALOG as never }, /list/],
    [
      "two catalogs with one ID",
      { catalogs: [TEST_CATALOG, catalogNamed(SHOP), catalogNamed(CATALOG_ID)] },
      /catalogs 0 and 2 share one catalogId/,
    ],
    ["an invalid catalog in the list", { catalogs: [TEST_CATALOG, { nope: 1 }] }, /catalogs\[1\]/],
  ])("refuses %s with invalid_config", (_label, options, message) => {
    const error = configError(options as Partial<FunctionCallGateOptions>);
    expect(error).toMatch(/^invalid_config: /);
    expect(error).toMatch(message);
  });
});
