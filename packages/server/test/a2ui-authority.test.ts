import { mkdtempSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  a2uiFunctionCapability,
  type Capability,
  type GrantInput,
  openStores,
  type StoreBundle,
} from "@tessera/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen, type RunningServer } from "../src/listen.js";
import { createTesseraService } from "../src/service.js";
import { a2uiCall, CATALOG, CATALOG_ID, call, principal, ticket } from "./support/service.js";

/**
 * An A2UI function call is an act: the service decides it against the caller's grants
 * (`a2ui.call` on that catalog function) after the claim and before dispatch, and the gate's
 * events carry the caller's principal, so its own audit and explain find them.
 */
const alice = principal("token-alice", {
  namespaceId: "team",
  actor: "a",
  authority: "host",
  owner: "alice",
});
const carol = principal("token-carol", { namespaceId: "team", actor: "c", authority: "host" });
const dave = principal("token-dave", { namespaceId: "team", actor: "d", authority: "host" });
// The agent: its only grant is a spent messages ticket.
const mallory = principal("token-mallory", {
  namespaceId: "team",
  actor: "m",
  authority: "host",
  owner: "alice",
});
const principals = [alice.config, carol.config, dave.config, mallory.config];

function grantFor(id: string, subject: string, capability: Capability, maxUses?: number) {
  return {
    id,
    namespaceId: "team",
    issuer: "host",
    subject,
    capabilities: [capability],
    ...(maxUses === undefined ? {} : { constraints: { maxUses } }),
    issuedAt: new Date(Date.now() - 60_000).toISOString(),
  } satisfies GrantInput;
}

async function grantedStores(): Promise<StoreBundle> {
  const stores = await openStores(`sqlite:${join(mkdtempSync(join(tmpdir(), "a2ui-")), "t.db")}`);
  await stores.grants.add(grantFor("alice-add", "a", a2uiFunctionCapability(CATALOG_ID, "add")));
  await stores.grants.add(grantFor("carol-add", "c", a2uiFunctionCapability(CATALOG_ID, "add"), 2));
  // Another catalog's `add`: it covers nothing here.
  await stores.grants.add(
    grantFor("dave-other", "d", a2uiFunctionCapability("https://elsewhere.test/c", "add")),
  );
  await stores.grants.add(ticket("mallory-ticket", "bob", { subject: "m" }));
  await stores.usage.tryConsume("team", "mallory-ticket", 1);
  return stores;
}

let stores: StoreBundle;
let server: RunningServer;
let base: string;
let endpoint: Server;
const ran: string[] = [];
const SECRET = "function-endpoint-secret";

beforeAll(async () => {
  endpoint = createServer((request, response) => {
    let body = "";
    request.on("data", (chunk) => {
      body += chunk;
    });
    request.on("end", () => {
      ran.push((JSON.parse(body) as { functionCallId: string }).functionCallId);
      response.writeHead(200, { "content-type": "application/json" });
      response.end(JSON.stringify({ value: 3 }));
    });
  });
  await new Promise<void>((resolve) => endpoint.listen(0, "127.0.0.1", resolve));
  const { port } = endpoint.address() as AddressInfo;
  stores = await grantedStores();
  server = await listen({
    stores,
    principals,
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

const claim = (token: string, id: string) =>
  call(base, "POST", "/v1/a2ui/claim", { token, body: { message: a2uiCall(id) } });
const oneStep = (token: string, id: string) =>
  call(base, "POST", "/v1/a2ui/call", { token, body: { message: a2uiCall(id) } });
const auditOf = async (token: string, callId: string) =>
  (await call(base, "GET", `/v1/audit?callId=${callId}`, { token })).body.events as Record<
    string,
    unknown
  >[];
const explainOf = async (token: string, callId: string) =>
  (await call(base, "GET", `/v1/explain?callId=${callId}`, { token })).body;

const refusedReply = (id: string) => ({
  version: "v1.0",
  rendererFunctionResponse: {
    functionCallId: id,
    error: { code: "EXECUTION_FAILED", message: expect.any(String) },
  },
});

describe("A2UI calls are decided against the caller's grants", () => {
  it("refuses claim + settle to an agent without an a2ui.call grant: denied, nothing to dispatch", async () => {
    const refused = await claim(mallory.token, "m-1");
    expect(refused.body).toEqual({
      status: "refused",
      receipt: "denied",
      reply: refusedReply("m-1"),
    });
    // The kernel's event says why (for the owner); the gate's says what the caller got.
    const events = await auditOf(mallory.token, "m-1");
    expect(events.map((e) => [e.source, e.outcome, e.reason, e.action ?? null])).toEqual([
      ["kernel", "denied", "no_capability", "a2ui.call"],
      ["gate", "denied", "policy_denied", null],
    ]);
    expect(events[1]).toMatchObject({ receipt: "denied", code: "EXECUTION_FAILED" });
    expect(await explainOf(mallory.token, "m-1")).toMatchObject({
      verdict: "never_granted",
      code: "EXECUTION_FAILED",
    });
  });

  it("refuses the one-step call without a grant: the function endpoint is never called", async () => {
    const before = ran.length;
    const refused = await oneStep(mallory.token, "m-2");
    expect(refused.body).toEqual({ reply: refusedReply("m-2"), receipt: "denied" });
    const other = await oneStep(dave.token, "d-1");
    expect(other.body.receipt).toBe("denied");
    expect(ran.length).toBe(before);
  });

  it("dispatches a call the grant covers, both ways", async () => {
    const claimed = await claim(alice.token, "a-1");
    expect(claimed.body).toMatchObject({ status: "dispatch", call: { functionCallId: "a-1" } });
    const settled = await call(base, "POST", "/v1/a2ui/settle", {
      token: alice.token,
      body: { handle: claimed.body.handle, value: 3 },
    });
    expect(settled.body.receipt).toBe("dispatched");
    const one = await oneStep(alice.token, "a-2");
    expect(one.body).toEqual({
      reply: { version: "v1.0", rendererFunctionResponse: { functionCallId: "a-2", value: 3 } },
      receipt: "dispatched",
    });
    expect(ran).toContain("a-2");
  });

  it("spends a bounded grant once per call, atomically, and never for a retried ID", async () => {
    const before = ran.length;
    const ids = ["c-1", "c-2", "c-3", "c-4", "c-5"];
    const answers = await Promise.all(ids.map((id) => oneStep(carol.token, id)));
    const receipts = answers.map((a) => a.body.receipt as string);
    expect(receipts.filter((r) => r === "dispatched")).toHaveLength(2);
    expect(receipts.filter((r) => r === "denied")).toHaveLength(3);
    expect(ran.length - before).toBe(2);
    expect(await stores.usage.getUsage("team", "carol-add")).toBe(2);
    const spent = ids[receipts.indexOf("denied")] as string;
    expect(await explainOf(carol.token, spent)).toMatchObject({ verdict: "spent" });
    // A retry of a dispatched ID loses its claim before the kernel is asked: nothing spent.
    const retried = await oneStep(carol.token, ids[receipts.indexOf("dispatched")] as string);
    expect(retried.body.receipt).toBe("none");
    expect(ran.length - before).toBe(2);
  });
});

describe("the gate's decisions are in the caller's own audit and explain", () => {
  it("finds an allowed one-step call by call ID and trace ID, with the principal on every event", async () => {
    await oneStep(alice.token, "fx-1");
    const events = await auditOf(alice.token, "fx-1");
    expect(events.map((e) => [e.source, e.reason])).toEqual([
      ["kernel", "allowed"],
      ["gate", "dispatched"],
    ]);
    for (const event of events) {
      expect(event).toMatchObject({
        namespaceId: "team",
        actor: "a",
        authority: "host",
        owner: "alice",
        traceId: "fx-1",
      });
    }
    const byTrace = await call(base, "GET", "/v1/audit?traceId=fx-1", { token: alice.token });
    expect(byTrace.body.events).toHaveLength(2);
    expect(await explainOf(alice.token, "fx-1")).toMatchObject({
      verdict: "allowed",
      code: null,
    });
  });

  it("finds a call refused before the claim (unknown function): the gate's event alone", async () => {
    const refused = await call(base, "POST", "/v1/a2ui/call", {
      token: alice.token,
      body: { message: a2uiCall("fx-2", {}, "drop_tables") },
    });
    expect(refused.body.receipt).toBe("denied");
    const events = await auditOf(alice.token, "fx-2");
    expect(events.map((e) => [e.source, e.reason])).toEqual([["gate", "unknown_function"]]);
    expect(await explainOf(alice.token, "fx-2")).toMatchObject({ verdict: "refused" });
  });

  it("keeps them from every other principal: a foreign call ID reads like an unused one", async () => {
    expect(await auditOf(carol.token, "fx-1")).toEqual([]);
    expect(await explainOf(carol.token, "fx-1")).toMatchObject({ verdict: "unknown" });
  });
});

describe("the same rule through the library (createTesseraService, mounted)", () => {
  it("dispatches alice's claim and refuses mallory's", async () => {
    const own = await grantedStores();
    const service = createTesseraService({
      stores: own,
      principals,
      a2ui: { catalogs: [CATALOG] },
      log: false,
    });
    const host = createServer(service.handler);
    await new Promise<void>((resolve) => host.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(host.address() as AddressInfo).port}`;
    try {
      const body = (id: string) => ({ message: a2uiCall(id) });
      const allowed = await call(url, "POST", "/v1/a2ui/claim", {
        token: alice.token,
        body: body("lib-1"),
      });
      expect(allowed.body.status).toBe("dispatch");
      const settled = await call(url, "POST", "/v1/a2ui/settle", {
        token: alice.token,
        body: { handle: allowed.body.handle, value: 1 },
      });
      expect(settled.body.receipt).toBe("dispatched");
      const denied = await call(url, "POST", "/v1/a2ui/claim", {
        token: mallory.token,
        body: body("lib-2"),
      });
      expect(denied.body).toMatchObject({ status: "refused", receipt: "denied" });
    } finally {
      await new Promise<void>((resolve) => host.close(() => resolve()));
      await service.close();
      await own.close();
    }
  });
});
