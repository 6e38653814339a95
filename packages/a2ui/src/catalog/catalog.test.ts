import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { isTesseraError } from "@tessera/core";
import { describe, expect, it } from "vitest";
import { TEST_CATALOG } from "../../test/fixtures/catalog.js";
import { CatalogIndex } from "./catalog.js";

function configCode(catalog: unknown): string | undefined {
  try {
    new CatalogIndex(catalog);
  } catch (error) {
    if (isTesseraError(error)) return error.code;
    throw error;
  }
  return undefined;
}

/** The basic catalog shipped with the installed @a2ui/web_core package. */
function basicCatalog(): Record<string, unknown> {
  const require = createRequire(import.meta.url);
  let dir = path.dirname(require.resolve("@a2ui/web_core"));
  while (!dir.endsWith(`${path.sep}web_core`)) dir = path.dirname(dir);
  return JSON.parse(
    readFileSync(path.join(dir, "src/v1_0/schemas/catalogs/basic/catalog.json"), "utf8"),
  );
}

describe("CatalogIndex", () => {
  it("loads a valid catalog and answers each lookup", () => {
    const index = new CatalogIndex(TEST_CATALOG);
    const id = TEST_CATALOG.catalogId;
    expect(typeof index.lookup(id, "add")).toBe("object");
    expect(typeof index.lookup(id, "sharedAdd")).toBe("object");
    expect(index.lookup(id, "rendererAdd")).toBe("caller_not_allowed");
    expect(index.lookup(id, "defaultAdd")).toBe("caller_not_allowed");
    expect(index.lookup(id, "openPanel")).toBe("user_activation_required");
    expect(index.lookup(id, "missing")).toBe("unknown_function");
    expect(index.lookup(id, "__proto__")).toBe("unknown_function");
    expect(index.lookup("other", "add")).toBe("unknown_catalog");
  });

  it("loads the official basic catalog; its functions are renderer-only, so refused to agents", () => {
    const basic = basicCatalog();
    const index = new CatalogIndex(basic);
    expect(index.lookup(basic.catalogId as string, "formatString")).toBe("caller_not_allowed");
    expect(index.lookup(basic.catalogId as string, "openUrl")).toBe("user_activation_required");
  });

  it("never changes the host's catalog object while validating it", () => {
    const catalog = structuredClone(TEST_CATALOG) as Record<string, unknown>;
    const before = JSON.stringify(catalog);
    new CatalogIndex(catalog);
    expect(JSON.stringify(catalog)).toBe(before);
  });

  it.each([
    ["not an object", "catalog"],
    ["without catalogId", { functions: {} }],
    ["with an unknown top-level field", { catalogId: "c", extra: 1 }],
    [
      "with a function missing returnType",
      {
        catalogId: "c",
        functions: {
          f: { type: "object", properties: { call: { const: "f" } }, required: ["call"] },
        },
      },
    ],
    [
      "with an agent-callable function that requires user activation",
      {
        catalogId: "c",
        functions: {
          f: {
            type: "object",
            returnType: "void",
            allowedCallers: "agentOnly",
            requiresUserActivation: true,
            properties: { call: { const: "f" } },
            required: ["call"],
          },
        },
      },
    ],
    [
      "with an args schema that does not compile",
      {
        catalogId: "c",
        functions: {
          f: {
            type: "object",
            returnType: "void",
            allowedCallers: "agentOnly",
            properties: {
              call: { const: "f" },
              args: { type: "object", properties: { x: { $ref: "#/nowhere" } } },
            },
            required: ["call"],
          },
        },
      },
    ],
    // Before: the validator's copy threw its own DataCloneError, or the getter's error, untyped.
    ["holding a function", { ...TEST_CATALOG, describe: () => "a catalog" }],
    ["holding a symbol", { ...TEST_CATALOG, tag: Symbol("catalog") }],
    [
      "whose getter throws",
      Object.defineProperty({ ...TEST_CATALOG }, "functions", {
        enumerable: true,
        get() {
          throw new Error("no functions today");
        },
      }),
    ],
  ])("refuses a catalog %s with invalid_config", (_label, catalog) => {
    expect(configCode(catalog)).toBe("invalid_config");
  });
});
