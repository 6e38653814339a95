/**
 * The one catalog every gate worker serves: a single agent-callable `add`, so a call that
 * runs is observable (its callback) and anything else is a refusal worth counting. Shared by
 * the worker process and the parent that writes its messages.
 */
export const GATE_CATALOG_ID = "https://tessera.test/catalogs/gate-workers";

export const GATE_CATALOG = {
  catalogId: GATE_CATALOG_ID,
  functions: {
    add: {
      type: "object",
      returnType: "number",
      allowedCallers: "agentOnly",
      properties: {
        call: { const: "add" },
        args: {
          type: "object",
          properties: { a: { type: "number" }, b: { type: "number" } },
          required: ["a", "b"],
          additionalProperties: false,
        },
      },
      required: ["call", "args"],
    },
  },
} as const;

/**
 * An A2UI v1.0 `callRendererFunction` message for the gate workers' catalog. `call` may name
 * a function the catalog does not declare, to be refused.
 */
export function gateCallMessage(
  functionCallId: unknown,
  args: unknown = { a: 1, b: 2 },
  call = "add",
): Record<string, unknown> {
  return {
    version: "v1.0",
    callRendererFunction: {
      functionCallId,
      callFunction: { call, catalogId: GATE_CATALOG_ID, args },
    },
  };
}
