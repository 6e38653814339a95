import { TesseraError } from "@tessera/core";
import type { AnySchema, ValidateFunction } from "ajv/dist/2020.js";
import { CATALOG_SLOT, messageValidators, newSchemaSet } from "../schemas/official.js";

/** An A2UI v1.0 catalog definition (`catalog_definition.json`); only what the gate reads is typed. */
export interface CatalogDefinition {
  readonly catalogId: string;
  readonly functions?: Readonly<Record<string, FunctionDefinition>>;
  readonly [key: string]: unknown;
}

export interface FunctionDefinition {
  readonly returnType: string;
  readonly allowedCallers?: "rendererOnly" | "agentOnly" | "rendererOrAgent";
  readonly requiresUserActivation?: boolean;
  readonly [key: string]: unknown;
}

/** Why a call is not callable by an agent: each maps to an audit reason of the catalog gate. */
export type CatalogRefusal =
  | "unknown_catalog"
  | "unknown_function"
  | "caller_not_allowed"
  | "user_activation_required"
  | "invalid_args";

export interface CatalogFunction {
  readonly name: string;
  readonly definition: FunctionDefinition;
  /** Validates the wire-level call object `{ call, args }` against the function's schema. */
  readonly validate: ValidateFunction;
}

/**
 * One host catalog, validated against the official `catalog_definition.json` on load, with
 * each function's schema compiled once. The catalog is bound into the protocol's `catalog.json`
 * slot, so `common_types.json` references inside function schemas resolve as the spec intends.
 */
export class CatalogIndex {
  readonly catalogId: string;
  readonly #functions = new Map<string, CatalogFunction>();

  constructor(catalog: unknown) {
    const checkDefinition = messageValidators().catalogDefinition;
    if (!checkDefinition(catalog)) {
      const first = checkDefinition.errors?.[0];
      throw new TesseraError(
        "invalid_config",
        `the catalog is not a valid A2UI v1.0 catalog definition (${first?.instancePath || "/"} ${first?.message ?? ""})`,
      );
    }
    const definition = catalog as CatalogDefinition;
    this.catalogId = definition.catalogId;
    const functions = definition.functions ?? {};
    const ajv = newSchemaSet();
    try {
      ajv.addSchema(bindToSlot(definition) as AnySchema);
      for (const [name, fn] of Object.entries(functions)) {
        const validate = ajv.getSchema(`${CATALOG_SLOT}#/functions/${pointerSegment(name)}`);
        if (!validate) throw new Error("function schema not found");
        this.#functions.set(name, Object.freeze({ name, definition: fn, validate }));
      }
    } catch (error) {
      throw new TesseraError("invalid_config", "a catalog function schema did not compile", {
        cause: error,
      });
    }
  }

  /** The function an agent may call, or why it may not (never consults the args). */
  lookup(catalogId: string, name: string): CatalogFunction | CatalogRefusal {
    if (catalogId !== this.catalogId) return "unknown_catalog";
    const fn = this.#functions.get(name);
    if (!fn) return "unknown_function";
    // An agent's call never carries a user activation. (The catalog schema already forces such
    // functions to `rendererOnly`; this check keeps the more precise reason for audit.)
    if (fn.definition.requiresUserActivation === true) return "user_activation_required";
    const callers = fn.definition.allowedCallers ?? "rendererOnly"; // the schema's default
    if (callers !== "agentOnly" && callers !== "rendererOrAgent") return "caller_not_allowed";
    return fn;
  }
}

/**
 * A copy of the catalog under the slot's `$id`. A catalog without `$defs` gets the two
 * definitions `common_types.json` expects, built from its own functions and components.
 */
function bindToSlot(catalog: CatalogDefinition): Record<string, unknown> {
  const refs = (group: string, names: string[]) =>
    names.length === 0
      ? false
      : { oneOf: names.map((n) => ({ $ref: `#/${group}/${pointerSegment(n)}` })) };
  const components = Object.keys((catalog.components as Record<string, unknown> | undefined) ?? {});
  const defs = (catalog.$defs as Record<string, unknown> | undefined) ?? {
    anyFunction: refs("functions", Object.keys(catalog.functions ?? {})),
    anyComponent: refs("components", components),
  };
  return { ...catalog, $id: CATALOG_SLOT, $defs: defs };
}

/** A JSON Pointer segment (RFC 6901) inside a URI fragment. */
function pointerSegment(name: string): string {
  return encodeURIComponent(name.replaceAll("~", "~0").replaceAll("/", "~1"));
}
