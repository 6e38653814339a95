import { describe, expect, it } from "vitest";
import {
  findSharedBudgets,
  type GrantInput,
  GrantSchema,
  InMemoryGrantStore,
  issueFanoutTickets,
  isTesseraError,
  MESSAGE_SEND_ACTION,
  messageSendCapability,
} from "../index.js";

const base = { namespaceId: "ns", issuer: "host", subject: "asker", owner: "alice" };

describe("issueFanoutTickets", () => {
  it("issues one exact single-use ticket per recipient", async () => {
    const store = new InMemoryGrantStore();
    const tickets = await issueFanoutTickets(store, {
      ...base,
      recipients: ["a", "b", "c"],
      idPrefix: "t-",
    });
    expect(tickets.map((t) => t.id)).toEqual(["t-0", "t-1", "t-2"]);
    for (const [i, ticket] of tickets.entries()) {
      expect(ticket.constraints.maxUses).toBe(1);
      expect(ticket.capabilities).toEqual([
        messageSendCapability(["a", "b", "c"][i] as string, "alice"),
      ]);
    }
    expect(findSharedBudgets(tickets)).toEqual([]);
    expect(await store.listGrants("ns", "asker")).toHaveLength(3);
  });

  it("refuses duplicate recipients (two tickets would let the question be asked twice)", async () => {
    const error = await issueFanoutTickets(new InMemoryGrantStore(), {
      ...base,
      recipients: ["a", "a"],
    }).catch((e: unknown) => e);
    expect(isTesseraError(error, "invalid_input")).toBe(true);
  });

  it("refuses tickets without an owner (from plain JS, a misspelt option): none issued", async () => {
    for (const owner of [undefined, "", 7]) {
      const store = new InMemoryGrantStore();
      const error = await issueFanoutTickets(store, {
        ...base,
        owner: owner as unknown as string,
        recipients: ["a", "b"],
      }).catch((e: unknown) => e);
      expect(isTesseraError(error, "invalid_grant")).toBe(true);
      expect(await store.listGrants("ns", "asker")).toEqual([]);
    }
  });

  it("issues none when one recipient is refused: validation comes before the store", async () => {
    const store = new InMemoryGrantStore();
    const error = await issueFanoutTickets(store, {
      ...base,
      recipients: ["a", "b", "..", "c"],
    }).catch((e: unknown) => e);
    expect(isTesseraError(error, "invalid_grant")).toBe(true);
    expect(await store.listNamespace("ns")).toEqual([]);
  });

  it("hands a store with addMany every ticket in one call, sealed", async () => {
    const store = new InMemoryGrantStore();
    const calls: (readonly unknown[])[] = [];
    const spied = {
      add: () => Promise.reject(new Error("add must not be called when addMany exists")),
      addMany: (grants: readonly GrantInput[]) => {
        calls.push(grants);
        return store.addMany(grants);
      },
    };
    const tickets = await issueFanoutTickets(spied, { ...base, recipients: ["a", "b", "c"] });
    expect(calls).toHaveLength(1);
    expect(calls[0]).toHaveLength(3);
    // The store kept the objects it was handed: sealed grants are not parsed again.
    expect(calls[0]?.every((grant, i) => grant === tickets[i])).toBe(true);
    expect(Object.isFrozen(tickets)).toBe(true);
    expect(await store.listGrants("ns", "asker")).toEqual(tickets);
  });

  it("falls back to add, one ticket at a time, for a store without addMany", async () => {
    const store = new InMemoryGrantStore();
    let added = 0;
    const addOnly = {
      add: (grant: GrantInput) => {
        added++;
        return store.add(grant);
      },
    };
    const tickets = await issueFanoutTickets(addOnly, { ...base, recipients: ["a", "b"] });
    expect(added).toBe(2);
    expect(await store.listGrants("ns", "asker")).toEqual(tickets);
  });

  it("gives each call fresh IDs by default, so two fan-outs never collide", async () => {
    const store = new InMemoryGrantStore();
    const one = await issueFanoutTickets(store, { ...base, recipients: ["a"] });
    const two = await issueFanoutTickets(store, { ...base, recipients: ["a"] });
    expect(one[0]?.id).not.toBe(two[0]?.id);
  });
});

describe("findSharedBudgets", () => {
  const grantWith = (capabilities: unknown[], maxUses?: number) =>
    GrantSchema.parse({
      id: `g${capabilities.length}-${maxUses}`,
      namespaceId: base.namespaceId,
      issuer: base.issuer,
      subject: base.subject,
      capabilities,
      constraints: maxUses === undefined ? {} : { maxUses },
      issuedAt: "2026-01-01T00:00:00.000Z",
    });

  it("warns when one bounded grant covers several recipients", () => {
    const shared = grantWith(
      [messageSendCapability("a", "alice"), messageSendCapability("b", "alice")],
      1,
    );
    const [warning] = findSharedBudgets([shared]);
    expect(warning).toMatchObject({ grantId: shared.id, maxUses: 1, recipients: ["a", "b"] });
    expect(warning?.message).toContain("one ticket per recipient");
  });

  it("warns when a bounded grant covers every recipient through descendants scope", () => {
    const everyone = grantWith(
      [
        {
          resource: { namespace: "messages", path: [] },
          actions: [MESSAGE_SEND_ACTION],
          scope: "descendants",
        },
      ],
      3,
    );
    expect(findSharedBudgets([everyone])[0]?.recipients).toBe("any");
  });

  it("stays quiet for unbounded grants, single recipients and other actions", () => {
    const unbounded = grantWith([
      messageSendCapability("a", "alice"),
      messageSendCapability("b", "alice"),
    ]);
    const single = grantWith([messageSendCapability("a", "alice")], 1);
    const reads = grantWith(
      [
        { resource: { namespace: "files", path: ["x"] }, actions: ["files.read"], scope: "exact" },
        { resource: { namespace: "files", path: ["y"] }, actions: ["files.read"], scope: "exact" },
      ],
      1,
    );
    expect(findSharedBudgets([unbounded, single, reads])).toEqual([]);
  });
});
