import { readFileSync } from "node:fs";
import { TesseraError } from "@tessera/core";
import { Ajv2020, type AnySchema, type ValidateFunction } from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";

/**
 * The official A2UI v1.0 JSON schemas, compiled once per process.
 *
 * They ship inside this package (`schemas/v1_0/`), copied byte for byte at build time from the
 * pinned `@a2ui/web_core` by `scripts/copy-official-schemas.mjs`; a test compares the copy with
 * the official files. Reading them from the renderer package at runtime would make every host
 * install a renderer (lit, date-fns, a second zod) to read four JSON files.
 */

const SOURCE_PACKAGE = "@a2ui/web_core";
/** The version this gate was written and tested against; package.json pins it too. */
export const A2UI_PACKAGE_VERSION = "0.11.0";
export const SPEC_BASE = "https://a2ui.org/specification/v1_0/";
/**
 * The protocol leaves one slot open: `common_types.json` refers to the active catalog as
 * `catalog.json`. Each compiled schema set binds that slot to a concrete catalog.
 */
export const CATALOG_SLOT = `${SPEC_BASE}catalog.json`;

/** Where the shipped copy lives, from `src/schemas/` and `dist/schemas/` alike. */
export const SHIPPED_SCHEMAS_DIR = new URL("../../schemas/v1_0/", import.meta.url);

// ajv-formats is CommonJS with a default export; under NodeNext its type is the module object.
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

interface OfficialFiles {
  readonly version: string;
  readonly commonTypes: Record<string, unknown>;
  readonly agentToRenderer: Record<string, unknown>;
  readonly rendererToAgent: Record<string, unknown>;
  readonly catalogDefinition: Record<string, unknown>;
}

let files: OfficialFiles | undefined;

/** Reads the schema files once per process; a missing or unreadable file is `schema_unavailable`. */
export function officialFiles(): OfficialFiles {
  if (files) return files;
  try {
    const read = (name: string) =>
      JSON.parse(readFileSync(new URL(name, SHIPPED_SCHEMAS_DIR), "utf8"));
    const source = read("source.json") as { package?: unknown; version?: unknown };
    if (source.package !== SOURCE_PACKAGE || source.version !== A2UI_PACKAGE_VERSION) {
      // Pinned on purpose: a new schema release is adopted by a deliberate, tested upgrade.
      throw new Error(
        `the shipped schemas come from ${String(source.package)} ${String(source.version)}, not the pinned ${SOURCE_PACKAGE} ${A2UI_PACKAGE_VERSION}`,
      );
    }
    files = Object.freeze({
      version: A2UI_PACKAGE_VERSION,
      commonTypes: read("common_types.json"),
      agentToRenderer: read("agent_to_renderer.json"),
      rendererToAgent: read("renderer_to_agent.json"),
      catalogDefinition: read("catalog_definition.json"),
    });
    return files;
  } catch (error) {
    throw new TesseraError(
      "schema_unavailable",
      "the A2UI v1.0 schemas shipped with @tessera/a2ui could not be loaded (run the build)",
      { cause: error },
    );
  }
}

/**
 * A fresh ajv (draft 2020-12, formats) holding the common types. Strict mode is off because
 * the A2UI schemas and catalogs carry protocol keywords (`returnType`, `allowedCallers`,
 * `catalogId`, `functions`…) that are metadata, not validation keywords. Schemas added here
 * are not re-validated against the meta-schema (compiling it costs ~100 ms per instance):
 * the official files are trusted, and catalogs are checked by `catalog_definition.json`.
 */
export function newSchemaSet(options: { useDefaults?: boolean; meta?: boolean } = {}): Ajv2020 {
  const ajv = new Ajv2020({
    strict: false,
    allErrors: false,
    useDefaults: options.useDefaults === true,
    validateSchema: options.meta === true,
    meta: options.meta === true,
  });
  addFormats(ajv);
  ajv.addSchema(officialFiles().commonTypes as AnySchema);
  return ajv;
}

/**
 * The catalog slot used to check message *envelopes*: any named call with object args. The
 * catalog check that follows validates the call against the host's own catalog, so an
 * undeclared function is answered as a catalog refusal rather than as a malformed message.
 */
const ANY_CALL_CATALOG = {
  $id: CATALOG_SLOT,
  $defs: {
    anyFunction: {
      type: "object",
      properties: { call: { type: "string" }, args: { type: "object" } },
      required: ["call"],
    },
    anyComponent: { type: "object" },
  },
};

interface MessageValidators {
  /** An agent's `callRendererFunction` message (agent_to_renderer.json). */
  readonly callRendererFunction: ValidateFunction;
  /** Any renderer-to-agent message: what every gate reply must be (renderer_to_agent.json). */
  readonly rendererToAgent: ValidateFunction;
  /** A catalog definition (catalog_definition.json), read with its defaults applied. */
  readonly catalogDefinition: ValidateFunction;
}

let messageSet: Ajv2020 | undefined;
const compiled = new Map<keyof MessageValidators, ValidateFunction>();

function compileOnce(
  name: keyof MessageValidators,
  build: () => ValidateFunction,
): ValidateFunction {
  let validate = compiled.get(name);
  if (!validate) {
    try {
      validate = build();
    } catch (error) {
      throw new TesseraError("schema_unavailable", "the A2UI v1.0 schemas did not compile", {
        cause: error,
      });
    }
    compiled.set(name, validate);
  }
  return validate;
}

function fromMessageSet(ref: string): ValidateFunction {
  if (!messageSet) {
    const official = officialFiles();
    const ajv = newSchemaSet();
    ajv.addSchema(ANY_CALL_CATALOG);
    ajv.addSchema(official.agentToRenderer as AnySchema);
    ajv.addSchema(official.rendererToAgent as AnySchema);
    messageSet = ajv;
  }
  const validate = messageSet.getSchema(`${SPEC_BASE}${ref}`);
  if (!validate) throw new Error(`schema ${ref} not found`);
  return validate;
}

/** Validators compiled from the official files once per process, each on first use. */
export function messageValidators(): MessageValidators {
  return VALIDATORS;
}

const VALIDATORS: MessageValidators = Object.freeze({
  get callRendererFunction() {
    return compileOnce("callRendererFunction", () =>
      fromMessageSet("agent_to_renderer.json#/$defs/CallRendererFunctionMessage"),
    );
  },
  get rendererToAgent() {
    return compileOnce("rendererToAgent", () => fromMessageSet("renderer_to_agent.json"));
  },
  get catalogDefinition() {
    return compileOnce("catalogDefinition", () =>
      catalogDefinitionValidator(officialFiles().catalogDefinition),
    );
  },
});

/**
 * `catalog_definition.json` constrains `allowedCallers` with an `if` on
 * `requiresUserActivation` that also matches when the property is absent, so read literally it
 * would force every function without an explicit `requiresUserActivation: false` to be
 * `rendererOnly`. The schema declares `false` as that property's default; validating with
 * defaults applied (on a copy — the host's object is never changed) gives the intended reading.
 */
function catalogDefinitionValidator(schema: Record<string, unknown>): ValidateFunction {
  // Function args are JSON Schemas checked against the meta-schema, so this set loads it.
  const ajv = newSchemaSet({ useDefaults: true, meta: true });
  const validate = ajv.compile(schema as AnySchema);
  const check = ((data: unknown) => {
    const ok = validate(structuredClone(data));
    check.errors = validate.errors;
    return ok;
  }) as ValidateFunction;
  return check;
}
