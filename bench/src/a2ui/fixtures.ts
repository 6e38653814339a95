import { type ClaimStore, FunctionCallGate, type SettleTiming } from "@tessera/a2ui";

/** One agent-callable function, and 1,000 distinct well-formed calls to it. */
export const CATALOG_ID = "https://tessera.dev/catalogs/bench";
export const CATALOG = {
  catalogId: CATALOG_ID,
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
};

export const BATCH = 1000;
export const MESSAGES = Array.from({ length: BATCH }, (_, i) => ({
  version: "v1.0",
  callRendererFunction: {
    functionCallId: `call-${i}`,
    callFunction: { call: "add", catalogId: CATALOG_ID, args: { a: i, b: 1 } },
  },
}));

/** The bench gate; receipts after the reply unless `settle` says otherwise (the gate's default). */
export function gateOver(claims: ClaimStore, settle?: SettleTiming): FunctionCallGate {
  return new FunctionCallGate({
    claims,
    catalog: CATALOG,
    invoke: ({ args }) => (args.a as number) + (args.b as number),
    ...(settle === undefined ? {} : { settle }),
  });
}
