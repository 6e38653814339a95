import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import {
  a2uiFunctionCapability,
  type GrantInput,
  openStores,
  type StoreBundle,
} from "@tessera/core";
import type { DriverCounter } from "@tessera/testkit";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { countedBackends } from "../../../test/support/round-trip-backends.js";
import { buildApp } from "../src/app.js";
import { gateSession } from "../src/principals.js";
import { a2uiCall, CATALOG, CATALOG_ID, principal } from "./support/service.js";

/**
 * Durable round trips before the reply for the service's A2UI calls, counted at the driver
 * (SQLite commits, PostgreSQL statements that write, Redis scripts and write commands) at the
 * moment each reply is handed to the socket (Fastify's onSend). One A2UI act is one write: the
 * claim, the kernel's decision (a bounded grant's use) and its event, recorded together; a
 * refusal's claim is settled `denied` in that same write. The gate's own events and the receipt
 * (with the reply as the claim's answer) are written after the reply. Exact counts, not rates.
 */

const alice = principal("alice-token", {
  namespaceId: "team",
  actor: "caller",
  authority: "host",
  owner: "alice",
});
// No a2ui.call grant: every call is refused by the kernel.
const mallory = principal("mallory-token", {
  namespaceId: "team",
  actor: "intruder",
  authority: "host",
  owner: "alice",
});

const aliceAdd: GrantInput = {
  id: "alice-add",
  namespaceId: "team",
  issuer: "host",
  subject: "caller",
  capabilities: [a2uiFunctionCapability(CATALOG_ID, "add")],
  // Bounded, so every allowed act spends a use inside its one write.
  constraints: { maxUses: 100 },
  issuedAt: new Date(Date.now() - 60_000).toISOString(),
};

const BACKENDS = countedBackends(`serve_${randomBytes(6).toString("hex")}`);

for (const backend of BACKENDS) {
  const url = backend.url();
  describe.skipIf(url === undefined)(
    `A2UI: durable round trips before the reply: ${backend.name}`,
    () => {
      let counter: DriverCounter;
      let stores: StoreBundle;
      let app: FastifyInstance;
      let endpoint: Server;
      const ran: string[] = [];
      /** Writes counted when each reply was handed over, by request ID. */
      const atReply = new Map<string, { writes: number; written: readonly string[] }>();

      beforeAll(async () => {
        // Before the stores open: a Redis connection binds its driver's method when it is made.
        counter = backend.counter();
        stores = await openStores(url as string);
        await stores.grants.add(aliceAdd);
        // The one-step mode's function endpoint: answers 3, and remembers what ran.
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
        app = buildApp({
          stores,
          principals: [alice.config, mallory.config],
          a2ui: {
            catalogs: [CATALOG],
            functionEndpoint: { url: `http://127.0.0.1:${port}/fn`, secret: "s3cret-endpoint" },
          },
          log: false,
        });
        app.addHook("onSend", async (request) => {
          atReply.set(request.id, { writes: counter.writes, written: [...counter.written] });
        });
        await app.ready();
      });

      afterAll(async () => {
        await app?.close();
        await stores?.close();
        endpoint?.close();
        counter?.stop();
        await backend.cleanup();
      });

      let sent = 0;
      /** Earlier requests' writes landed, the caller's grants cached: the counter starts at 0. */
      async function settledAndWarm(token: string, id: string) {
        // A cold grant read is a read, but Redis serves it with a script, which a count at the
        // driver cannot tell from a write.
        await app.inject({
          method: "GET",
          url: "/v1/tools",
          headers: { authorization: `Bearer ${token}`, "x-request-id": `tools-${id}` },
        });
        await app.drainWrites();
        counter.reset();
      }
      /** One request; its JSON answer and the writes counted before its reply. */
      async function post(token: string, path: string, body: unknown, warm = true) {
        const id = `req-${sent++}`;
        if (warm) await settledAndWarm(token, id);
        const reply = await app.inject({
          method: "POST",
          url: path,
          headers: { authorization: `Bearer ${token}`, "x-request-id": id },
          payload: body as Record<string, unknown>,
        });
        const seen = atReply.get(id);
        return {
          body: reply.json() as Record<string, unknown>,
          writes: seen?.writes,
          why: String(seen?.written),
        };
      }

      it("claim + settle, allowed: one write before the claim's reply (the act), none before the settle's", async () => {
        const claim = await post(alice.token, "/v1/a2ui/claim", { message: a2uiCall("two-1") });
        expect(claim.body.status).toBe("dispatch");
        expect(claim.writes, claim.why).toBe(1);
        // The settle follows at once: nothing else waits to be written meanwhile.
        counter.reset();
        const settle = await post(
          alice.token,
          "/v1/a2ui/settle",
          { handle: claim.body.handle, value: 3 },
          false,
        );
        expect(settle.body.receipt).toBe("dispatched");
        expect(settle.writes, settle.why).toBe(0);
        // After the reply: the receipt, with the reply as the claim's answer, and the gate's event.
        await app.drainWrites();
        const stored = await stores.claims.get({
          session: gateSession(alice.config),
          functionCallId: "two-1",
        });
        expect(stored?.receipt?.status).toBe("dispatched");
        expect(stored?.answer).toEqual(settle.body.reply);
        expect(await stores.usage.getUsage("team", "alice-add")).toBe(1);
        const events = await stores.audit.read({ callId: "two-1" });
        expect(events.map((e) => [e.source, e.reason])).toEqual([
          ["kernel", "allowed"],
          ["gate", "dispatched"],
        ]);
      });

      it("claim, denied by the kernel: one write (the claim settled denied with its event), nothing after", async () => {
        const claim = await post(mallory.token, "/v1/a2ui/claim", { message: a2uiCall("two-2") });
        expect(claim.body).toMatchObject({ status: "refused", receipt: "denied" });
        expect(claim.writes, claim.why).toBe(1);
        await app.drainWrites();
        const stored = await stores.claims.get({
          session: gateSession(mallory.config),
          functionCallId: "two-2",
        });
        expect(stored?.receipt?.status).toBe("denied");
        expect(stored?.answer).toEqual({ status: "denied", code: "tool_unavailable" });
        const events = await stores.audit.read({ callId: "two-2" });
        expect(events.map((e) => [e.source, e.outcome, e.reason])).toEqual([
          ["kernel", "denied", "no_capability"],
          ["gate", "denied", "policy_denied"],
        ]);
      });

      it("one-step call, allowed: one write before the reply", async () => {
        const call = await post(alice.token, "/v1/a2ui/call", { message: a2uiCall("one-1") });
        expect(call.body).toEqual({
          reply: {
            version: "v1.0",
            rendererFunctionResponse: { functionCallId: "one-1", value: 3 },
          },
          receipt: "dispatched",
        });
        expect(call.writes, call.why).toBe(1);
        expect(ran).toContain("one-1");
      });

      it("one-step call, denied by the kernel: one write, the function endpoint never called", async () => {
        const call = await post(mallory.token, "/v1/a2ui/call", { message: a2uiCall("one-2") });
        expect(call.body.receipt).toBe("denied");
        expect(call.writes, call.why).toBe(1);
        expect(ran).not.toContain("one-2");
      });

      it("a duplicate ID: at most the one attempt that finds it claimed, receipt none, nothing runs", async () => {
        const before = ran.length;
        const again = await post(alice.token, "/v1/a2ui/call", { message: a2uiCall("one-1") });
        expect(again.body).toMatchObject({
          receipt: "none",
          reply: { error: { code: "INVALID_FUNCTION_CALL", functionCallId: "one-1" } },
        });
        expect(again.writes ?? 0, again.why).toBeLessThanOrEqual(1);
        expect(ran.length).toBe(before);
        // Nothing spent for the duplicate: two calls ran, two uses.
        await app.drainWrites();
        expect(await stores.usage.getUsage("team", "alice-add")).toBe(2);
      });

      it("a call refused before the claim (unknown function): no write before the reply", async () => {
        const call = await post(alice.token, "/v1/a2ui/call", {
          message: a2uiCall("one-3", {}, "drop_tables"),
        });
        expect(call.body.receipt).toBe("denied");
        expect(call.writes, call.why).toBe(0);
        await app.drainWrites();
        const events = await stores.audit.read({ callId: "one-3" });
        expect(events.map((e) => [e.source, e.reason])).toEqual([["gate", "unknown_function"]]);
      });
    },
  );
}
