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

/** Why a call is not callable by an agent: each is an audit reason of the catalog stage. */
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
    if (!definitionChecks(checkDefinition, catalog)) {
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
 * The catalogs one gate serves, by `catalogId`. The A2UI v1.0 spec lets a renderer hold
 * several (its conformance cases use three); each is compiled on its own, bound to its own
 * `catalog.json` slot, so one catalog's `$defs` never resolve another's references.
 */
export class CatalogSet {
  readonly #byId = new Map<string, CatalogIndex>();

  /** `catalog` is shorthand for `catalogs: [catalog]`; exactly one of the two must be given. */
  constructor(options: { readonly catalog?: unknown; readonly catalogs?: unknown }) {
    const { catalog, catalogs } = options;
    if (catalog !== undefined && catalogs !== undefined) {
      throw new TesseraError("invalid_config", "give the gate catalog or catalogs, not both");
    }
    if (catalogs !== undefined && !Array.isArray(catalogs)) {
      throw new TesseraError("invalid_config", "catalogs must be a list of catalog definitions");
    }
    const list: readonly unknown[] = catalogs ?? (catalog === undefined ? [] : [catalog]);
    if (list.length === 0) {
      throw new TesseraError("invalid_config", "the gate needs at least one catalog");
    }
    const firstAt = new Map<string, number>();
    for (const [i, definition] of list.entries()) {
      let index: CatalogIndex;
      try {
        index = new CatalogIndex(definition);
      } catch (error) {
        if (catalogs === undefined) throw error;
        throw new TesseraError("invalid_config", `catalogs[${i}]: ${(error as Error).message}`, {
          cause: error,
        });
      }
      const earlier = firstAt.get(index.catalogId);
      if (earlier !== undefined) {
        // Which one would answer a call would depend on list order: refuse rather than guess.
        throw new TesseraError(
          "invalid_config",
          `catalogs ${earlier} and ${i} share one catalogId; each catalog needs its own`,
        );
      }
      firstAt.set(index.catalogId, i);
      this.#byId.set(index.catalogId, index);
    }
  }

  lookup(catalogId: string, name: string): CatalogFunction | CatalogRefusal {
    return this.#byId.get(catalogId)?.lookup(catalogId, name) ?? "unknown_catalog";
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

/**
 * `check(catalog)`, with a catalog the check cannot even read (a function or symbol inside,
 * which the copy it validates cannot hold; a getter that throws) refused `invalid_config` like
 * any other catalog that is not a definition, not with the copy's own `DataCloneError`.
 */
function definitionChecks(check: (data: unknown) => boolean, catalog: unknown): boolean {
  try {
    return check(catalog);
  } catch (error) {
    throw new TesseraError(
      "invalid_config",
      `the catalog is not a valid A2UI v1.0 catalog definition (it holds a value JSON cannot carry: ${(error as Error).name})`,
      { cause: error },
    );
  }
}
