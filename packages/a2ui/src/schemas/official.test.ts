import { describe, expect, it } from "vitest";
import { A2UI_PACKAGE_VERSION, messageValidators, officialFiles } from "./official.js";

describe("the official A2UI v1.0 schemas", () => {
  it("are loaded from the installed, pinned @a2ui/web_core", () => {
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
