import { randomBytes } from "node:crypto";
import { type MessageTransport, openStores, type StoreBundle } from "@tessera/core";
import type { DriverCounter } from "@tessera/testkit";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { countedBackends } from "../../../test/support/round-trip-backends.js";
import { buildApp } from "../src/app.js";
import { ASKER, ticket } from "./support/service.js";

/**
 * Durable round trips before the reply, per act, counted at the driver (SQLite commits,
 * PostgreSQL statements that write, Redis scripts and write commands) and read at the moment
 * the reply is handed to the socket (Fastify's onSend): a retry-safe send, allowed or denied,
 * is one write (its act: claim, spend, event); a denial without a call ID is none (its event
 * is written after the reply); a replay of an answered call ID writes nothing but the attempt
 * that finds it claimed. Exact counts, not rates.
 */

const alice = ASKER;

const BACKENDS = countedBackends(`serve_${randomBytes(6).toString("hex")}`);

const delivered: MessageTransport = { deliver: async () => ({ status: "delivered", reply: "ok" }) };

for (const backend of BACKENDS) {
  const url = backend.url();
  describe.skipIf(url === undefined)(
    `durable round trips before the reply: ${backend.name}`,
    () => {
      let counter: DriverCounter;
      let stores: StoreBundle;
      let app: FastifyInstance;
      /** Writes (and every statement) counted when each reply was handed over, by request ID. */
      const atReply = new Map<
        string,
        { writes: number; total: number; written: readonly string[] }
      >();

      beforeAll(async () => {
        // Before the stores open: a Redis connection binds its driver's method when it is made.
        counter = backend.counter();
        stores = await openStores(url as string);
        for (let i = 0; i < 4; i++) await stores.grants.add(ticket(`t-${i}`, `colleague-${i}`));
        app = buildApp({ stores, principals: [alice.config], transport: delivered, log: false });
        app.addHook("onSend", async (request) => {
          atReply.set(request.id, {
            writes: counter.writes,
            total: counter.total,
            written: [...counter.written],
          });
        });
        await app.ready();
      });

      afterAll(async () => {
        await app?.close();
        await stores?.close();
        counter?.stop();
        await backend.cleanup();
      });

      /** Sends one request after the writes of earlier ones have landed; the writes before its reply. */
      let sent = 0;
      async function writesBeforeReply(body: Record<string, unknown>) {
        const id = `send-${sent++}`;
        // The principal's grant set read and cached first: a cold read is a read, but Redis
        // serves it with a script, which a count at the driver cannot tell from a write.
        await app.inject({
          method: "GET",
          url: "/v1/tools",
          headers: { authorization: `Bearer ${alice.token}`, "x-request-id": `tools-${id}` },
        });
        // Earlier requests' writes after their replies (answers, denial events) land first.
        await app.drainWrites();
        counter.reset();
        const reply = await app.inject({
          method: "POST",
          url: "/v1/messages",
          headers: { authorization: `Bearer ${alice.token}`, "x-request-id": id },
          payload: body,
        });
        const seen = atReply.get(id);
        return {
          status: reply.json().status as string,
          writes: seen?.writes,
          total: seen?.total,
          written: seen?.written,
        };
      }

      // Every shared store's ledger checks grant versions in the act's own write, so a warm turn
      // reads none first. Counted where reads are round trips: SQLite's are local calls its
      // commit counter does not see (its check is in the ledger conformance suite).
      it.runIf(backend.name !== "sqlite")(
        "a warm retry-safe allowed send: its act is the only statement before the reply",
        async () => {
          expect(stores.acts?.checksVersionsIn).toBe(stores.grants.versionSpace);
          const sent = await writesBeforeReply({
            recipient: "colleague-2",
            payload: "hi",
            callId: "w-1",
          });
          expect(sent.status).toBe("delivered");
          expect(sent.total, String(sent.written)).toBe(1);
          expect(sent.writes).toBe(1);
        },
      );

      it("a retry-safe allowed send: exactly one write before the reply (the act)", async () => {
        const sent = await writesBeforeReply({
          recipient: "colleague-0",
          payload: "hi",
          callId: "a-1",
        });
        expect(sent.status).toBe("delivered");
        expect(sent.writes, String(sent.written)).toBe(1);
      });

      it("a retry-safe denied send: exactly one write (the claim, settled with the refusal)", async () => {
        const sent = await writesBeforeReply({
          recipient: "stranger",
          payload: "hi",
          callId: "d-1",
        });
        expect(sent.status).toBe("denied");
        expect(sent.writes, String(sent.written)).toBe(1);
      });

      it("a denial without a call ID: no write before the reply", async () => {
        const sent = await writesBeforeReply({ recipient: "stranger", payload: "hi" });
        expect(sent.status).toBe("denied");
        expect(sent.writes, String(sent.written)).toBe(0);
      });

      it("a replay of an answered call ID: at most the one attempt that finds it claimed", async () => {
        const first = await writesBeforeReply({
          recipient: "colleague-1",
          payload: "x",
          callId: "r-1",
        });
        expect(first.writes, String(first.written)).toBe(1);
        const replay = await writesBeforeReply({
          recipient: "colleague-1",
          payload: "x",
          callId: "r-1",
        });
        expect(replay.status).toBe("delivered");
        expect(replay.writes ?? 0, String(replay.written)).toBeLessThanOrEqual(1);
      });
    },
  );
}
