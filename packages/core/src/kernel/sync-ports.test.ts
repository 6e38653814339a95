import { describe, expect, it, vi } from "vitest";
import { ctx, NS, OWNER, rig, T0 } from "../../test/fixtures.js";
import {
  type ConsumeResult,
  createKernel,
  InMemoryGrantStore,
  InMemoryGrantUsageStore,
  InProcessTransport,
  issueFanoutTickets,
  isTesseraError,
  type MessageTransport,
} from "../index.js";

/**
 * The kernel spends in-memory uses without awaiting (sync-ports.ts). These hold that it is
 * only a shortcut: the same ticket spent once, and any replaced `tryConsume` still asked.
 */

async function oneTicket(
  usage: InMemoryGrantUsageStore | object = new InMemoryGrantUsageStore(),
  transport?: MessageTransport,
) {
  const r = rig({
    usage: usage as InMemoryGrantUsageStore,
    ...(transport === undefined ? {} : { extra: { transport } }),
  });
  await issueFanoutTickets(r.grants, {
    namespaceId: NS,
    issuer: "host",
    subject: "asker",
    owner: OWNER,
    recipients: ["bob"],
    idPrefix: "ticket-",
    issuedAt: new Date(T0),
  });
  return r;
}

describe("spending in-memory uses without awaiting", () => {
  it("spends a ticket once when two sends race for it, and audits both", async () => {
    const usage = new InMemoryGrantUsageStore();
    const r = await oneTicket(usage);
    await using turn = await r.kernel.openTurnAuthority(ctx());
    const results = await Promise.all([
      turn.sendMessage({ recipient: "bob", payload: "q", callId: "one" }),
      turn.sendMessage({ recipient: "bob", payload: "q", callId: "two" }),
    ]);
    expect(results.map((x) => x.status).sort()).toEqual(["delivered", "denied"]);
    expect(r.transport.delivered).toHaveLength(1);
    expect(await usage.getUsage(NS, "ticket-0")).toBe(1);
    expect(r.audit.events.map((e) => e.reason)).toEqual(["allowed", "grant_exhausted"]);
  });

  it("asks a subclass that replaces tryConsume through its own method", async () => {
    class Refusing extends InMemoryGrantUsageStore {
      calls = 0;
      override async tryConsume(): Promise<ConsumeResult> {
        this.calls++;
        return { consumed: false, used: 1 };
      }
    }
    const usage = new Refusing();
    const r = await oneTicket(usage);
    await using turn = await r.kernel.openTurnAuthority(ctx());
    const result = await turn.sendMessage({ recipient: "bob", payload: "q" });
    expect(result.status).toBe("denied");
    expect(usage.calls).toBe(1);
    expect(r.transport.delivered).toHaveLength(0);
  });

  it("asks a spy put on one store's tryConsume", async () => {
    const usage = new InMemoryGrantUsageStore();
    const spy = vi.spyOn(usage, "tryConsume");
    const r = await oneTicket(usage);
    await using turn = await r.kernel.openTurnAuthority(ctx());
    expect((await turn.sendMessage({ recipient: "bob", payload: "q" })).status).toBe("delivered");
    expect(spy).toHaveBeenCalledTimes(1);
  });

  it("fails closed for a look-alike that borrows the method but is no such store", async () => {
    const lookAlike = {
      getUsage: async () => 0,
      tryConsume: InMemoryGrantUsageStore.prototype.tryConsume,
    };
    const r = await oneTicket(lookAlike);
    await using turn = await r.kernel.openTurnAuthority(ctx());
    const result = await turn.sendMessage({ recipient: "bob", payload: "q" });
    expect(result).toEqual({ status: "denied", code: "tool_unavailable" });
    expect(r.transport.delivered).toHaveLength(0);
    expect(r.audit.events.at(-1)?.reason).toBe("usage_store_unavailable");
  });
});

describe("delivering in process without awaiting", () => {
  it("asks a spy put on one transport's deliver, and hands back its reply", async () => {
    const transport = InProcessTransport.echo();
    const spy = vi.spyOn(transport, "deliver");
    const r = await oneTicket(undefined, transport);
    await using turn = await r.kernel.openTurnAuthority(ctx());
    const result = await turn.sendMessage({ recipient: "bob", payload: "q" });
    expect(result).toMatchObject({ status: "delivered", reply: "reply from bob" });
    expect(spy).toHaveBeenCalledTimes(1);
  });

  it("waits for a handler that answers later", async () => {
    const transport = new InProcessTransport().route("bob", async () => {
      await new Promise((resolve) => setImmediate(resolve));
      return "later";
    });
    const r = await oneTicket(undefined, transport);
    await using turn = await r.kernel.openTurnAuthority(ctx());
    const result = await turn.sendMessage({ recipient: "bob", payload: "q" });
    expect(result).toMatchObject({ status: "delivered", reply: "later" });
    expect(transport.delivered).toHaveLength(1);
  });

  it("reads a transport that answers nonsense as a failed delivery, audited", async () => {
    const nonsense = { deliver: async () => undefined } as unknown as MessageTransport;
    const r = await oneTicket(undefined, nonsense);
    await using turn = await r.kernel.openTurnAuthority(ctx());
    const result = await turn.sendMessage({ recipient: "bob", payload: "q" });
    expect(result).toEqual({ status: "denied", code: "delivery_failed" });
    expect(r.audit.events.map((e) => e.detail)).toEqual([
      undefined,
      "transport answered transport_threw",
    ]);
  });

  it("rejects, never throws, when a sink refuses the event synchronously", async () => {
    const grants = new InMemoryGrantStore();
    const transport = InProcessTransport.echo();
    await issueFanoutTickets(grants, {
      namespaceId: NS,
      issuer: "host",
      subject: "asker",
      owner: OWNER,
      recipients: ["bob"],
      issuedAt: new Date(T0),
    });
    const audit = {
      append: () => {
        throw new Error("disk full");
      },
    };
    const kernel = createKernel({ grants, usage: new InMemoryGrantUsageStore(), audit, transport });
    const turn = await kernel.openTurnAuthority(ctx({ now: new Date(T0).toISOString() }));
    const pending = turn.sendMessage({ recipient: "bob", payload: "q" });
    const error = await pending.catch((e: unknown) => e);
    expect(isTesseraError(error, "audit_unavailable")).toBe(true);
    expect(transport.delivered).toHaveLength(0);
  });
});
