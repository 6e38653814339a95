import { describe, expect, it } from "vitest";
import { ctx, grant, NS, OWNER, rig, T0 } from "../../test/fixtures.js";
import {
  explain,
  findSharedBudgets,
  type GrantUsageStore,
  InMemoryGrantUsageStore,
  issueFanoutTickets,
  messageSendCapability,
  type SendMessageResult,
} from "../index.js";

/**
 * Recipient-scoped single-use messaging: the seed's five scenes as regression tests, and each
 * recipient's send raced against duplicates inside one turn.
 */

const colleagues = (n: number) => Array.from({ length: n }, (_, i) => `colleague-${i}`);

async function fanout(recipients: string[], options: { usage?: GrantUsageStore | null } = {}) {
  const r = rig(options);
  const tickets = await issueFanoutTickets(r.grants, {
    namespaceId: NS,
    issuer: "host",
    subject: "asker",
    owner: OWNER,
    recipients,
    idPrefix: "ticket-",
    // Issued at the rig's clock: a ticket issued later than the decision is not yet valid.
    issuedAt: new Date(T0),
  });
  return { ...r, tickets };
}

describe("the five scenes", () => {
  it("1. three colleagues, three single-use tickets, one turn: three distinct deliveries", async () => {
    const r = await fanout(colleagues(3));
    await using turn = await r.kernel.openTurnAuthority(ctx());
    const results = [];
    for (const recipient of colleagues(3)) {
      results.push(await turn.sendMessage({ recipient, payload: { question: "ship it?" } }));
    }
    expect(results.map((x) => x.status)).toEqual(["delivered", "delivered", "delivered"]);
    expect(results.map((x) => (x.status === "delivered" ? x.reply : undefined))).toEqual(
      colleagues(3).map((c) => `reply from ${c}`),
    );
    expect(new Set(r.transport.delivered.map((e) => e.recipient)).size).toBe(3);
    expect(new Set(r.transport.delivered.map((e) => e.messageId)).size).toBe(3);
    for (const ticket of r.tickets) expect(await r.usage.getUsage(NS, ticket.id)).toBe(1);
  });

  it("2. the same question asked twice: tool_unavailable, audit grant_exhausted, one delivery", async () => {
    const r = await fanout(["colleague-0"]);
    await using turn = await r.kernel.openTurnAuthority(ctx());
    await turn.sendMessage({ recipient: "colleague-0", payload: "q", callId: "first" });
    const replay = await turn.sendMessage({
      recipient: "colleague-0",
      payload: "q",
      callId: "replay",
    });
    expect(replay).toEqual({ status: "denied", code: "tool_unavailable" });
    expect((await explain(r.audit, "replay")).verdict).toBe("spent");
    expect(r.audit.events.at(-1)?.reason).toBe("grant_exhausted");
    expect(r.transport.delivered).toHaveLength(1);
  });

  it("3. a colleague nobody issued a ticket for: no_matching_grant, the ticket stays 0/1", async () => {
    const r = await fanout(["colleague-0"]);
    await using turn = await r.kernel.openTurnAuthority(ctx());
    expect(await turn.listTools()).toEqual(["messages.send"]);
    const wrong = await turn.sendMessage({
      recipient: "colleague-1",
      payload: "q",
      callId: "wrong",
    });
    expect(wrong).toEqual({ status: "denied", code: "no_matching_grant" });
    expect((await explain(r.audit, "wrong")).verdict).toBe("never_granted");
    expect(await r.usage.getUsage(NS, "ticket-0")).toBe(0);
    expect(r.transport.delivered).toHaveLength(0);
  });

  it("4. the owner revokes one ticket; the other is untouched", async () => {
    const r = await fanout(["colleague-0", "colleague-1"]);
    await r.grants.revoke(NS, "ticket-0");
    await using turn = await r.kernel.openTurnAuthority(ctx());
    const revoked = await turn.sendMessage({
      recipient: "colleague-0",
      payload: "q",
      callId: "r0",
    });
    const sent = await turn.sendMessage({ recipient: "colleague-1", payload: "q", callId: "r1" });
    expect(revoked).toEqual({ status: "denied", code: "no_matching_grant" });
    expect(r.audit.events[0]).toMatchObject({ reason: "revoked", grantId: "ticket-0" });
    expect(sent.status).toBe("delivered");
    expect(r.transport.delivered.map((e) => e.recipient)).toEqual(["colleague-1"]);
  });

  it("5. no usage store: every single-use send fails closed before the transport", async () => {
    const r = await fanout(["colleague-0", "colleague-1"], { usage: null });
    await using turn = await r.kernel.openTurnAuthority(ctx());
    for (const recipient of ["colleague-0", "colleague-1"]) {
      expect(await turn.sendMessage({ recipient, payload: "q" })).toEqual({
        status: "denied",
        code: "tool_unavailable",
      });
    }
    expect(r.audit.events.map((e) => e.reason)).toEqual([
      "usage_store_unavailable",
      "usage_store_unavailable",
    ]);
    expect(r.transport.delivered).toHaveLength(0);
  });
});

describe("the shape the fan-out helper avoids", () => {
  it("one bounded grant covering every recipient shares one budget: the first send spends it", async () => {
    const r = rig();
    const shared = await r.grants.add(
      grant({
        id: "shared",
        constraints: { maxUses: 1 },
        capabilities: colleagues(3).map((c) => messageSendCapability(c, OWNER)),
      }),
    );
    expect(findSharedBudgets([shared])).toHaveLength(1);
    await using turn = await r.kernel.openTurnAuthority(ctx());
    const results = [];
    for (const recipient of colleagues(3))
      results.push(await turn.sendMessage({ recipient, payload: "q" }));
    expect(results.map((x) => x.status)).toEqual(["delivered", "denied", "denied"]);
    expect(r.transport.delivered).toHaveLength(1);
  });
});

/**
 * Delegates to the in-memory store after a random delay of zero to two macrotasks, so that
 * racing sends interleave their discovery reads and consumes in every order.
 */
function jittered(inner: GrantUsageStore): GrantUsageStore {
  const pause = async () => {
    for (let i = Math.floor(Math.random() * 3); i > 0; i--) {
      await new Promise((resolve) => setImmediate(resolve));
    }
  };
  return {
    getUsage: async (ns, id) => {
      await pause();
      return inner.getUsage(ns, id);
    },
    tryConsume: async (ns, id, max) => {
      await pause();
      return inner.tryConsume(ns, id, max);
    },
  };
}

describe.each([1, 25, 1000])("races at %i recipients", (count) => {
  const DUPLICATES = 2;

  it.each([
    ["in-memory store", () => new InMemoryGrantUsageStore()],
    ["jittered store", () => jittered(new InMemoryGrantUsageStore())],
  ])(
    "%s: exactly one delivery per recipient, usage 1 per ticket, every loser refused",
    async (_name, make) => {
      const store = make();
      const r = await fanout(colleagues(count), { usage: store });
      await using turn = await r.kernel.openTurnAuthority(ctx());
      const attempts = colleagues(count).flatMap((recipient) =>
        Array.from({ length: 1 + DUPLICATES }, (_, copy) => ({
          recipient,
          callId: `${recipient}#${copy}`,
        })),
      );
      const results = await Promise.all(
        attempts.map((a) =>
          turn.sendMessage({ recipient: a.recipient, payload: "q", callId: a.callId }),
        ),
      );

      const byRecipient = new Map<string, SendMessageResult[]>();
      attempts.forEach((a, i) => {
        byRecipient.set(a.recipient, [
          ...(byRecipient.get(a.recipient) ?? []),
          results[i] as SendMessageResult,
        ]);
      });
      for (const [recipient, outcomes] of byRecipient) {
        const delivered = outcomes.filter((o) => o.status === "delivered");
        expect(delivered, recipient).toHaveLength(1);
        // The race pins the outcome: which refusal a loser hears depends on timing.
        for (const loser of outcomes.filter((o) => o.status === "denied")) {
          expect(["no_matching_grant", "tool_unavailable"]).toContain(
            loser.status === "denied" && loser.code,
          );
        }
      }
      for (const ticket of r.tickets) expect(await store.getUsage(NS, ticket.id)).toBe(1);
      expect(r.transport.delivered).toHaveLength(count);
      expect(new Set(r.transport.delivered.map((e) => e.recipient)).size).toBe(count);
      expect(r.audit.events).toHaveLength(attempts.length);
      const losers = r.audit.events.filter((e) => e.outcome === "denied");
      expect(losers).toHaveLength(count * DUPLICATES);
      for (const event of losers) expect(event.reason).toBe("grant_exhausted");
    },
  );

  it("ordered: a duplicate is no_matching_grant while tickets remain, tool_unavailable once all are spent", async () => {
    const r = await fanout(colleagues(count));
    await using turn = await r.kernel.openTurnAuthority(ctx());
    const recipients = colleagues(count);
    for (const [index, recipient] of recipients.entries()) {
      expect((await turn.sendMessage({ recipient, payload: "q" })).status).toBe("delivered");
      const duplicate = await turn.sendMessage({ recipient, payload: "q" });
      const last = index === recipients.length - 1;
      expect(duplicate).toEqual({
        status: "denied",
        code: last ? "tool_unavailable" : "no_matching_grant",
      });
      expect(r.audit.events.at(-1)?.reason).toBe("grant_exhausted");
    }
    expect(r.transport.delivered).toHaveLength(count);
  });
});
