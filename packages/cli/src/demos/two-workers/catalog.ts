/** The demo's one-function catalog: an agent may call `quote`, a simulated tool. */
export const DEMO_CATALOG_ID = "https://tessera.dev/catalogs/two-workers-demo";

export const DEMO_CATALOG = {
  catalogId: DEMO_CATALOG_ID,
  functions: {
    quote: {
      type: "object",
      description: "Simulated tool: prices an order. Nothing outside the demo happens.",
      returnType: "object",
      allowedCallers: "agentOnly",
      properties: {
        call: { const: "quote" },
        args: {
          type: "object",
          properties: { sku: { type: "string" }, quantity: { type: "integer", minimum: 1 } },
          required: ["sku", "quantity"],
          additionalProperties: false,
        },
      },
      required: ["call", "args"],
    },
  },
};

export function quoteCall(functionCallId: string, quantity: number): Record<string, unknown> {
  return {
    version: "v1.0",
    callRendererFunction: {
      functionCallId,
      callFunction: {
        call: "quote",
        catalogId: DEMO_CATALOG_ID,
        args: { sku: "tile-7", quantity },
      },
    },
  };
}
