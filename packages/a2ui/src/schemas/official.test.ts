import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { describe, expect, it } from "vitest";
import {
  A2UI_PACKAGE_VERSION,
  messageValidators,
  officialFiles,
  SHIPPED_SCHEMAS_DIR,
} from "./official.js";

/** The pinned official package, a devDependency: the source of truth for the shipped copy. */
function officialSchemasDir(): string {
  const require = createRequire(import.meta.url);
  let dir = path.dirname(require.resolve("@a2ui/web_core"));
  while (!dir.endsWith(`${path.sep}web_core`)) dir = path.dirname(dir);
  const manifest = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8"));
  expect(manifest.version).toBe(A2UI_PACKAGE_VERSION);
  return path.join(dir, "src", "v1_0", "schemas");
}

describe("the official A2UI v1.0 schemas", () => {
  it("ship as a byte-for-byte copy of the pinned @a2ui/web_core files", () => {
    const official = officialSchemasDir();
    const source = JSON.parse(readFileSync(new URL("source.json", SHIPPED_SCHEMAS_DIR), "utf8"));
    expect(source).toMatchObject({ package: "@a2ui/web_core", version: A2UI_PACKAGE_VERSION });
    expect(source.files).toHaveLength(4);
    for (const name of source.files as string[]) {
      const shipped = readFileSync(new URL(name, SHIPPED_SCHEMAS_DIR));
      expect(shipped.equals(readFileSync(path.join(official, name))), name).toBe(true);
    }
  });

  it("are loaded from the shipped copy of the pinned version", () => {
    const files = officialFiles();
    expect(files.version).toBe(A2UI_PACKAGE_VERSION);
    expect(files.agentToRenderer.$id).toBe(
      "https://a2ui.org/specification/v1_0/agent_to_renderer.json",
    );
    expect(files.rendererToAgent.$id).toBe(
      "https://a2ui.org/specification/v1_0/renderer_to_agent.json",
    );
  });

  it("are compiled once per process", () => {
    const first = messageValidators().callRendererFunction;
    expect(messageValidators().callRendererFunction).toBe(first);
    expect(messageValidators().rendererToAgent).toBe(messageValidators().rendererToAgent);
  });

  it("accept the protocol's own examples of replies and refuse malformed ones", () => {
    const validate = messageValidators().rendererToAgent;
    expect(
      validate({ version: "v1.0", rendererFunctionResponse: { functionCallId: "1", value: 1 } }),
    ).toBe(true);
    // exactly one of value / error
    expect(
      validate({
        version: "v1.0",
        rendererFunctionResponse: {
          functionCallId: "1",
          value: 1,
          error: { code: "X", message: "m" },
        },
      }),
    ).toBe(false);
    // a generic error needs exactly one of functionCallId / surfaceId
    expect(
      validate({ version: "v1.0", error: { code: "INVALID_FUNCTION_CALL", message: "m" } }),
    ).toBe(false);
    // VALIDATION_FAILED may not carry a functionCallId
    expect(
      validate({
        version: "v1.0",
        error: {
          code: "VALIDATION_FAILED",
          message: "m",
          path: "",
          surfaceId: "",
          functionCallId: "1",
        },
      }),
    ).toBe(false);
  });
});
