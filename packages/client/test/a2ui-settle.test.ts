import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { a2uiFunctionCapability, openStores, type StoreBundle } from "@tessera/core";
import { listen, type RunningServer, tokenDigest } from "@tessera/server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTesseraClient, type TesseraClient } from "../src/index.js";
import { json, stubService } from "./stub.js";

/** Settling an A2UI call whose function returned nothing, against the real service. */
const AGENT = "agent-token-for-a2ui-settle-tests";
const CATALOG_ID = "https://tessera.dev/catalogs/client-settle-tests";
const CATALOG = {
  catalogId: CATALOG_ID,
  functions: {
    notify: {
      type: "object",
      description: "Simulated tool: returns nothing.",
      returnType: "object",
      allowedCallers: "agentOnly",
      properties: {
        call: { const: "notify" },
        args: { type: "object", properties: {}, additionalProperties: false },
      },
      required: ["call", "args"],
    },
  },
};

function notify(functionCallId: string) {
  return {
    version: "v1.0",
    callRendererFunction: {
      functionCallId,
      callFunction: { call: "notify", catalogId: CATALOG_ID, args: {} },
    },
  };
}

let stores: StoreBundle;
let server: RunningServer;
let agent: TesseraClient;

beforeAll(async () => {
  stores = await openStores(`sqlite:${join(mkdtempSync(join(tmpdir(), "client-a2ui-")), "t.db")}`);
  await stores.grants.add({
    id: "notify-asker",
    namespaceId: "team",
    issuer: "host",
    subject: "asker",
    capabilities: [a2uiFunctionCapability(CATALOG_ID, "notify")],
    issuedAt: new Date(Date.now() - 60_000).toISOString(),
  });
  server = await listen({
    stores,
    principals: [
      {
        tokenSha256: tokenDigest(AGENT),
        role: "agent",
        actor: "asker",
        namespaceId: "team",
        authority: "host",
      },
    ],
    a2ui: { catalogs: [CATALOG] },
    port: 0,
    log: false,
  });
  agent = createTesseraClient({ url: server.url, token: AGENT });
});

afterAll(async () => {
  await server?.close();
  await stores?.close();
});

async function dispatched(functionCallId: string): Promise<string> {
  const claim = await agent.a2uiClaim({ message: notify(functionCallId) });
  if (claim.status !== "dispatch") throw new Error(`expected a dispatch, got ${claim.status}`);
  return claim.handle;
}

describe("a2uiSettle of a function that returned nothing", () => {
  it("settles value: undefined as value null, and the call is dispatched", async () => {
    const handle = await dispatched("settle-undefined");
    const returned: unknown = undefined; // what a function without a return statement gives
    const settled = await agent.a2uiSettle({ handle, value: returned });
    expect(settled).toEqual({
      reply: {
        version: "v1.0",
        rendererFunctionResponse: { functionCallId: "settle-undefined", value: null },
      },
      receipt: "dispatched",
    });
  });

  it("still settles an error when value is undefined beside it", async () => {
    const handle = await dispatched("settle-error");
    const settled = await agent.a2uiSettle({
      handle,
      value: undefined,
      error: { message: "it failed" },
    } as { handle: string; error: { message: string } });
    expect(settled.receipt).toBe("failed");
    expect(settled.reply).toMatchObject({
      rendererFunctionResponse: {
        functionCallId: "settle-error",
        error: { code: "EXECUTION_FAILED" },
      },
    });
  });

  it("puts value: null on the wire", async () => {
    const reply = {
      reply: { version: "v1.0", rendererFunctionResponse: { functionCallId: "f", value: null } },
      receipt: "dispatched",
    };
    const stub = await stubService([json(200, reply)]);
    try {
      const client = createTesseraClient({ url: stub.url, token: "t" });
      await client.a2uiSettle({ handle: "h", value: undefined });
      expect(JSON.parse(stub.seen[0]?.body ?? "")).toEqual({ handle: "h", value: null });
    } finally {
      await stub.close();
    }
  });
});
