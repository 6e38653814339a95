/**
 * The SQLite stores under the real kernel and the real A2UI gate: every authority, usage and
 * audit record in one file works end to end; and when the file cannot answer (closed, or
 * locked by another writer past the busy timeout), the kernel and the gate fail closed:
 * nothing is delivered, no callback runs, and they work again once the lock is released.
 */
import { FunctionCallGate } from "@tessera/a2ui";
import {
  createKernel,
  explain,
  InMemoryGrantStore,
  InProcessTransport,
  issueFanoutTickets,
} from "@tessera/core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type OpenedSqlite, openFresh, writeLockOutage } from "./helpers.js";

const CTX = {
  namespaceId: "team",
  actor: "asker",
  authority: "host",
  owner: "alice",
  traceId: "trace-1",
};
const RECIPIENTS = ["bob", "carol", "dave"];

let opened: OpenedSqlite;
beforeEach(async () => {
  opened = await openFresh();
});
afterEach(() => opened.close());

describe("kernel over SQLite", () => {
  it("grants, usage and audit in one file: one delivery per ticket, spent tickets refused", async () => {
    const { grants, usage, audit } = opened.stores;
    await issueFanoutTickets(grants, {
      ...CTX,
      issuer: CTX.authority,
      subject: CTX.actor,
      recipients: RECIPIENTS,
    });
    const transport = InProcessTransport.echo();
    const kernel = createKernel({ grants, usage, audit, transport });
    const turn = await kernel.openTurnAuthority(CTX);
    const first = await Promise.all(
      [...RECIPIENTS, ...RECIPIENTS].map((recipient, i) =>
        turn.sendMessage({ recipient, payload: "ping", callId: `call-${i}` }),
      ),
    );
    await turn.close();
    const delivered = first.filter((r) => r.status === "delivered");
    expect(delivered).toHaveLength(RECIPIENTS.length);
    expect(
      first.filter((r) => r.status === "denied").map((r) => r.status === "denied" && r.code),
    ).toEqual(["tool_unavailable", "tool_unavailable", "tool_unavailable"]);
    // Spent is told apart from never granted by audit, read back from the same file.
    const refusedCall = `call-${first.findIndex((r) => r.status === "denied")}`;
    expect((await explain(audit, refusedCall)).verdict).toBe("spent");
  });

  it("a closed usage store: bounded sends are refused before the transport, nothing delivered", async () => {
    const grants = new InMemoryGrantStore();
    await issueFanoutTickets(grants, {
      ...CTX,
      issuer: CTX.authority,
      subject: CTX.actor,
      recipients: RECIPIENTS,
    });
    const transport = InProcessTransport.echo();
    const kernel = createKernel({ grants, usage: opened.stores.usage, transport });
    const turn = await kernel.openTurnAuthority(CTX);
    await opened.stores.close();
    const results = await Promise.all(
      RECIPIENTS.map((recipient) => turn.sendMessage({ recipient, payload: "ping" })),
    );
    await turn.close();
    expect(results).toEqual(RECIPIENTS.map(() => ({ status: "denied", code: "tool_unavailable" })));
    expect(transport.delivered).toHaveLength(0);
  });

  it("a write lock held past the busy timeout refuses sends; they succeed once it is released", async () => {
    const grants = new InMemoryGrantStore();
    await issueFanoutTickets(grants, {
      ...CTX,
      issuer: CTX.authority,
      subject: CTX.actor,
      recipients: ["bob"],
    });
    const transport = InProcessTransport.echo();
    const kernel = createKernel({ grants, usage: opened.stores.usage, transport });
    const outage = writeLockOutage(opened.url);
    await outage.interrupt();
    try {
      const turn = await kernel.openTurnAuthority(CTX);
      expect(await turn.sendMessage({ recipient: "bob", payload: "ping" })).toMatchObject({
        status: "denied",
      });
      await turn.close();
    } finally {
      await outage.restore();
    }
    expect(transport.delivered).toHaveLength(0);
    expect(
      await opened.stores.usage.getUsage("team", (await grants.listNamespace("team"))[0]?.id ?? ""),
    ).toBe(0);
    const turn = await kernel.openTurnAuthority(CTX);
    expect(await turn.sendMessage({ recipient: "bob", payload: "ping" })).toMatchObject({
      status: "delivered",
    });
    expect(await turn.sendMessage({ recipient: "bob", payload: "again" })).toMatchObject({
      status: "denied",
    });
    await turn.close();
    expect(transport.delivered).toHaveLength(1);
  });
});

describe("A2UI gate over SQLite", () => {
  const CATALOG_ID = "https://example.test/catalogs/ops";
  const catalog = {
    catalogId: CATALOG_ID,
    functions: {
      refund: {
        type: "object",
        returnType: "string",
        allowedCallers: "agentOnly",
        properties: {
          call: { const: "refund" },
          args: {
            type: "object",
            properties: { order: { type: "string" } },
            required: ["order"],
            additionalProperties: false,
          },
        },
        required: ["call", "args"],
      },
    },
  };
  const message = (functionCallId: string) => ({
    version: "v1.0",
    callRendererFunction: {
      functionCallId,
      callFunction: { call: "refund", catalogId: CATALOG_ID, args: { order: "A-1" } },
    },
  });

  function gateCounting(claims: OpenedSqlite["stores"]["claims"]) {
    const calls: string[] = [];
    const gate = new FunctionCallGate({
      claims,
      catalog,
      invoke: ({ args }) => {
        calls.push(String(args.order));
        return "refunded";
      },
    });
    return { gate, calls };
  }

  it("one callback per (session, ID); the claim and its receipt are in the file", async () => {
    const { gate, calls } = gateCounting(opened.stores.claims);
    const results = await Promise.all(
      Array.from({ length: 8 }, () => gate.handle("session-1", message("f-1"))),
    );
    expect(calls).toHaveLength(1);
    expect(results.map((r) => r.receipt.status).sort()).toEqual([
      "dispatched",
      ...Array.from({ length: 7 }, () => "none"),
    ]);
    await gate.drain(); // the receipt is written after the reply
    expect(
      (await opened.stores.claims.get({ session: "session-1", functionCallId: "f-1" }))?.receipt
        ?.status,
    ).toBe("dispatched");
  });

  it("a write lock held past the busy timeout: no callback, the call is refused; after release it runs once", async () => {
    const { gate, calls } = gateCounting(opened.stores.claims);
    const outage = writeLockOutage(opened.url);
    await outage.interrupt();
    try {
      const refused = await gate.handle("session-1", message("f-2"));
      expect(refused.receipt.status).toBe("denied");
      expect(JSON.stringify(refused.reply)).toContain("f-2");
    } finally {
      await outage.restore();
    }
    expect(calls).toHaveLength(0);
    expect((await gate.handle("session-1", message("f-3"))).receipt.status).toBe("dispatched");
    expect(calls).toHaveLength(1);
  });

  it("a closed claim store: every call refused, no callback", async () => {
    const { gate, calls } = gateCounting(opened.stores.claims);
    await opened.stores.close();
    const result = await gate.handle("session-1", message("f-4"));
    expect(result.receipt.status).toBe("denied");
    expect(calls).toHaveLength(0);
  });
});
