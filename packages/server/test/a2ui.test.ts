import { mkdtempSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { a2uiFunctionCapability, openStores, type StoreBundle } from "@tessera/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen, type RunningServer } from "../src/listen.js";
import { verifyWebhookSignature } from "../src/transport/webhook.js";
import { a2uiCall, CATALOG, CATALOG_ID, call, principal } from "./support/service.js";

/** The A2UI gate over HTTP: claim + settle, and the one-step mode through a function endpoint. */
const alice = principal("token-alice", { namespaceId: "team", actor: "a", authority: "host" });
const bob = principal("token-bob", { namespaceId: "team", actor: "b", authority: "host" });
const SECRET = "function-endpoint-secret";

let stores: StoreBundle;
let server: RunningServer;
let base: string;
let endpoint: Server;
const calls: unknown[] = [];

beforeAll(async () => {
  endpoint = createServer((request, response) => {
    let body = "";
    request.on("data", (chunk) => {
      body += chunk;
    });
    request.on("end", () => {
      const header = request.headers["tessera-signature"] as string | undefined;
      if (!verifyWebhookSignature({ secret: SECRET, body, header })) {
        response.writeHead(401).end();
        return;
      }
      const parsed = JSON.parse(body) as { args: { a: number; b: number } };
      calls.push(parsed);
      response.writeHead(200, { "content-type": "application/json" });
      response.end(JSON.stringify({ value: parsed.args.a + parsed.args.b }));
    });
  });
  await new Promise<void>((resolve) => endpoint.listen(0, "127.0.0.1", resolve));
  const { port } = endpoint.address() as AddressInfo;
  stores = await openStores(`sqlite:${join(mkdtempSync(join(tmpdir(), "a2ui-")), "t.db")}`);
  // Each may call `add`, without bound: the kernel decides every call (a2ui-authority.test.ts).
  for (const actor of ["a", "b"]) {
    await stores.grants.add({
      id: `add-${actor}`,
      namespaceId: "team",
      issuer: "host",
      subject: actor,
      capabilities: [a2uiFunctionCapability(CATALOG_ID, "add")],
      issuedAt: new Date(Date.now() - 60_000).toISOString(),
    });
  }
  server = await listen({
    stores,
    principals: [alice.config, bob.config],
    a2ui: {
      catalogs: [CATALOG],
      functionEndpoint: { url: `http://127.0.0.1:${port}/fn`, secret: SECRET },
    },
    port: 0,
    log: false,
  });
  base = server.url;
});

afterAll(async () => {
  await server?.close();
  await stores?.close();
  endpoint?.close();
});

describe("the A2UI gate: claim, then settle", () => {
  it("hands out a dispatch handle, then answers the value reply", async () => {
    const claim = await call(base, "POST", "/v1/a2ui/claim", {
      token: alice.token,
      body: { message: a2uiCall("fc-1", { a: 2, b: 3 }) },
    });
    expect(claim.body).toMatchObject({
      status: "dispatch",
      call: { functionCallId: "fc-1", call: "add", args: { a: 2, b: 3 } },
    });
    const settled = await call(base, "POST", "/v1/a2ui/settle", {
      token: alice.token,
      body: { handle: claim.body.handle, value: 5 },
    });
    expect(settled.body).toEqual({
      reply: { version: "v1.0", rendererFunctionResponse: { functionCallId: "fc-1", value: 5 } },
      receipt: "dispatched",
    });
  });

  it("refuses a retried call ID with the gate's INVALID_FUNCTION_CALL, nothing to dispatch", async () => {
    const again = await call(base, "POST", "/v1/a2ui/claim", {
      token: alice.token,
      body: { message: a2uiCall("fc-1", { a: 2, b: 3 }) },
    });
    expect(again.body).toMatchObject({
      status: "refused",
      receipt: "none",
      reply: { error: { code: "INVALID_FUNCTION_CALL", functionCallId: "fc-1" } },
    });
    // Call IDs are per principal: bob's fc-1 is his own first call.
    const bobs = await call(base, "POST", "/v1/a2ui/claim", {
      token: bob.token,
      body: { message: a2uiCall("fc-1") },
    });
    expect(bobs.body.status).toBe("dispatch");
    await call(base, "POST", "/v1/a2ui/settle", {
      token: bob.token,
      body: { handle: bobs.body.handle, error: { message: "no" } },
    });
  });

  it("refuses a function the catalog does not declare", async () => {
    const refused = await call(base, "POST", "/v1/a2ui/claim", {
      token: alice.token,
      body: { message: a2uiCall("fc-2", {}, "drop_tables") },
    });
    expect(refused.body).toMatchObject({ status: "refused", receipt: "denied" });
  });

  it("settles an error as EXECUTION_FAILED with receipt failed", async () => {
    const claim = await call(base, "POST", "/v1/a2ui/claim", {
      token: alice.token,
      body: { message: a2uiCall("fc-3") },
    });
    const settled = await call(base, "POST", "/v1/a2ui/settle", {
      token: alice.token,
      body: { handle: claim.body.handle, error: { message: "disk full" } },
    });
    expect(settled.body).toMatchObject({ receipt: "failed" });
    expect(settled.body.reply.rendererFunctionResponse.error.code).toBe("EXECUTION_FAILED");
  });

  it("a settle of the wrong shape is told what is wrong, and the handle stays open", async () => {
    const claim = await call(base, "POST", "/v1/a2ui/claim", {
      token: alice.token,
      body: { message: a2uiCall("fc-shape") },
    });
    const handle = claim.body.handle;
    for (const [body, said] of [
      [
        { handle, value: 1, error: { message: "x" } },
        "body: give the call's value or its error, not both",
      ],
      [{ handle, error: "boom" }, "body: error must be { message, code? }"],
      [{ handle }, "body: give the call's value or its error"],
      [{ handle, value: 1, extra: "<b>x</b>" }, "extra: Unrecognized key"],
      [{ handle: 7, value: 1 }, "body: handle must be the dispatch handle"],
    ] as const) {
      const refused = await call(base, "POST", "/v1/a2ui/settle", { token: alice.token, body });
      expect(refused.status).toBe(400);
      expect(refused.body.error.code).toBe("invalid_request");
      expect(refused.body.error.message).toContain(said);
      expect(refused.body.error.message).not.toContain("<b>");
    }
    const settled = await call(base, "POST", "/v1/a2ui/settle", {
      token: alice.token,
      body: { handle, value: 3 },
    });
    expect(settled.body.receipt).toBe("dispatched");
  });

  it("refuses a settle value nested past 64 levels (400), and the handle stays open", async () => {
    // Settled, such a value became the call's recorded answer, then overflowed the stack as
    // the reply was written: a 500, the call dispatched, its reply lost and its handle spent.
    const claim = await call(base, "POST", "/v1/a2ui/claim", {
      token: alice.token,
      body: { message: a2uiCall("fc-deep") },
    });
    const handle = claim.body.handle as string;
    const deep = `${"[".repeat(20_000)}${"]".repeat(20_000)}`;
    const refused = await call(base, "POST", "/v1/a2ui/settle", {
      token: alice.token,
      raw: `{"handle":${JSON.stringify(handle)},"value":${deep}}`,
    });
    expect(refused).toMatchObject({
      status: 400,
      body: { error: { code: "invalid_request", field: "value" } },
    });
    // 64 levels are a value like any other.
    const at64 = JSON.parse(`${"[".repeat(64)}${"]".repeat(64)}`);
    const settled = await call(base, "POST", "/v1/a2ui/settle", {
      token: alice.token,
      body: { handle, value: at64 },
    });
    expect(settled.body).toEqual({
      reply: {
        version: "v1.0",
        rendererFunctionResponse: { functionCallId: "fc-deep", value: at64 },
      },
      receipt: "dispatched",
    });
  });

  it("answers another principal's handle like an unknown one (404), and it stays open", async () => {
    const claim = await call(base, "POST", "/v1/a2ui/claim", {
      token: alice.token,
      body: { message: a2uiCall("fc-4") },
    });
    const foreign = await call(base, "POST", "/v1/a2ui/settle", {
      token: bob.token,
      body: { handle: claim.body.handle, value: 1 },
    });
    const unknown = await call(base, "POST", "/v1/a2ui/settle", {
      token: bob.token,
      body: { handle: "no-such-handle", value: 1 },
    });
    expect(foreign).toMatchObject({ status: 404 });
    expect(foreign.body).toEqual(unknown.body);
    const mine = await call(base, "POST", "/v1/a2ui/settle", {
      token: alice.token,
      body: { handle: claim.body.handle, value: 1 },
    });
    expect(mine.body.receipt).toBe("dispatched");
  });
});

describe("the A2UI gate, one step: the service calls the function endpoint", () => {
  it("calls the signed endpoint once, and refuses the retry", async () => {
    const body = { message: a2uiCall("fc-one", { a: 20, b: 22 }) };
    const first = await call(base, "POST", "/v1/a2ui/call", { token: alice.token, body });
    expect(first.body).toEqual({
      reply: { version: "v1.0", rendererFunctionResponse: { functionCallId: "fc-one", value: 42 } },
      receipt: "dispatched",
    });
    const again = await call(base, "POST", "/v1/a2ui/call", { token: alice.token, body });
    expect(again.body.receipt).toBe("none");
    expect(calls).toHaveLength(1);
  });
});
