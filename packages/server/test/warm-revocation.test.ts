import { randomBytes } from "node:crypto";
import { type MessageTransport, openStores, type StoreBundle } from "@tessera/core";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { countedBackends } from "../../../test/support/round-trip-backends.js";
import { buildApp } from "../src/app.js";
import { ASKER, ticket } from "./support/service.js";

/**
 * Grant changes made elsewhere (another bundle on the same store: another process, the CLI)
 * reach a warm service on every backend. Where the act ledger checks grant versions in the
 * act's own write (PostgreSQL, Redis), a warm turn reads no version before it, so these are
 * the cases that prove the check: a send on a grant revoked since the turn set was cached is
 * refused with nothing delivered or spent, and a refusal is read again before it stands, so a
 * grant added since is honoured.
 */

const alice = ASKER;

const BACKENDS = countedBackends(`serve_${randomBytes(6).toString("hex")}`);

for (const backend of BACKENDS) {
  const url = backend.url();
  describe.skipIf(url === undefined)(`grant changes reach a warm service: ${backend.name}`, () => {
    let stores: StoreBundle;
    /** The same store opened again: grant changes made outside the service. */
    let elsewhere: StoreBundle;
    let app: FastifyInstance;
    const delivered: string[] = [];
    const transport: MessageTransport = {
      deliver: async (envelope) => {
        delivered.push(envelope.callId as string);
        return { status: "delivered", reply: "ok" };
      },
    };

    beforeAll(async () => {
      stores = await openStores(url as string);
      elsewhere = await openStores(url as string);
      app = buildApp({ stores, principals: [alice.config], transport, log: false });
      await app.ready();
    });

    afterAll(async () => {
      await app?.close();
      await stores?.close();
      await elsewhere?.close();
      await backend.cleanup();
    });

    const send = async (recipient: string, callId: string) => {
      const reply = await app.inject({
        method: "POST",
        url: "/v1/messages",
        headers: { authorization: `Bearer ${alice.token}` },
        payload: { recipient, payload: "hi", callId },
      });
      return reply.json() as { status: string; code?: string };
    };

    it("a grant revoked elsewhere is refused on the next send, nothing delivered or spent", async () => {
      const grant = await elsewhere.grants.add({
        ...ticket("t-revoked", "bob"),
        constraints: { maxUses: 10 },
      });
      expect(await send("bob", "r-1")).toMatchObject({ status: "delivered" });
      expect(await send("bob", "r-2")).toMatchObject({ status: "delivered" });
      expect(await elsewhere.grants.revoke("team", grant.id)).toBe(true);
      expect(await send("bob", "r-3")).toMatchObject({ status: "denied" });
      expect(delivered.filter((id) => id.startsWith("r-"))).toEqual(["r-1", "r-2"]);
      expect(await stores.usage.getUsage("team", grant.id)).toBe(2);
    });

    it("a grant added elsewhere is honoured at once: a warm refusal is read again first", async () => {
      await elsewhere.grants.add({ ...ticket("t-dave", "dave"), constraints: { maxUses: 10 } });
      expect(await send("dave", "a-1")).toMatchObject({ status: "delivered" });
      expect(await send("erin", "a-2")).toMatchObject({ status: "denied" });
      await elsewhere.grants.add({ ...ticket("t-erin", "erin"), constraints: { maxUses: 10 } });
      expect(await send("erin", "a-3")).toMatchObject({ status: "delivered" });
      expect(delivered.filter((id) => id.startsWith("a-"))).toEqual(["a-1", "a-3"]);
    });
  });
}
