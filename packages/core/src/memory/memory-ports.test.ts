import { describe, expect, it } from "vitest";
import { GrantSchema } from "../contracts/schemas.js";
import {
  InMemoryAuditSink,
  InMemoryGrantStore,
  InMemoryGrantUsageStore,
  InProcessTransport,
  isTesseraError,
  messageSendCapability,
} from "../index.js";
import { sealValidatedGrant } from "../kernel/validated-grants.js";
import { fixedClock, ManualClock } from "../testing.js";

const input = (id: string, subject = "asker") => ({
  id,
  namespaceId: "ns",
  issuer: "host",
  subject,
  capabilities: [messageSendCapability("bob", "alice")],
  issuedAt: "2026-01-01T00:00:00.000Z",
});

describe("InMemoryGrantStore", () => {
  it("validates on add, refuses duplicates, lists by subject and namespace", async () => {
    const source = new InMemoryGrantStore();
    const added = await source.add(input("g1"));
    expect(added.constraints).toEqual({});
    expect(Object.isFrozen(added.capabilities[0]?.resource.path)).toBe(true);
    await source.add(input("g2", "other"));
    expect((await source.listGrants("ns", "asker")).map((g) => g.id)).toEqual(["g1"]);
    expect(await source.listNamespace("ns")).toHaveLength(2);
    expect(await source.listGrants("elsewhere", "asker")).toEqual([]);
    const duplicate = await source.add(input("g1")).catch((e: unknown) => e);
    expect(isTesseraError(duplicate, "invalid_grant")).toBe(true);
    const invalid = await source.add({ ...input("g3"), capabilities: [] }).catch((e: unknown) => e);
    expect(isTesseraError(invalid, "invalid_grant")).toBe(true);
  });

  it("revokes by storing a new object, and reports unknown grants", async () => {
    const source = new InMemoryGrantStore();
    const before = await source.add(input("g1"));
    expect(await source.revoke("ns", "g1", new Date("2026-02-01T00:00:00.000Z"))).toBe(true);
    const [after] = await source.listGrants("ns", "asker");
    expect(after?.revokedAt).toBe("2026-02-01T00:00:00.000Z");
    expect(before.revokedAt).toBeUndefined();
    expect(await source.revoke("ns", "nope")).toBe(false);
  });
});

describe("InMemoryGrantStore.addMany and grantsVersion", () => {
  it("stores grants this library sealed as they are, and parses anything else", async () => {
    const source = new InMemoryGrantStore();
    const sealed = sealValidatedGrant(GrantSchema.parse(input("sealed")));
    const plain = input("plain");
    const [first, second] = await source.addMany([sealed, plain]);
    expect(first).toBe(sealed);
    expect(second).not.toBe(plain);
    expect(Object.isFrozen(second)).toBe(true);
    const listed = await source.listGrants("ns", "asker");
    expect(listed[0]).toBe(sealed);
  });

  it("refuses the whole batch when one ID repeats, and keeps the version", async () => {
    const source = new InMemoryGrantStore();
    await source.add(input("g1"));
    const version = await source.grantsVersion("ns", "asker");
    for (const batch of [
      [input("g2"), input("g1")],
      [input("g3"), input("g3", "other")],
    ]) {
      const refused = await source.addMany(batch).catch((e: unknown) => e);
      expect(isTesseraError(refused, "invalid_grant")).toBe(true);
    }
    // A grant of another namespace stored before the repeat is taken back too.
    const elsewhere = { ...input("g9"), namespaceId: "ns2" };
    const mixed = await source.addMany([elsewhere, input("g4"), input("g1")]).catch((e) => e);
    expect(isTesseraError(mixed, "invalid_grant")).toBe(true);
    expect(await source.listNamespace("ns2")).toEqual([]);
    // Still at no change, like a holder never written.
    expect(await source.grantsVersion("ns2", "asker")).toBe(
      await source.grantsVersion("ns", "nobody"),
    );
    expect((await source.listNamespace("ns")).map((g) => g.id)).toEqual(["g1"]);
    expect(await source.grantsVersion("ns", "asker")).toBe(version);
    // Two stores never share a version, even at the same count of changes.
    expect(await new InMemoryGrantStore().grantsVersion("ns", "asker")).not.toBe(
      await new InMemoryGrantStore().grantsVersion("ns", "asker"),
    );
  });
});

describe("InMemoryGrantUsageStore", () => {
  it("consumes up to maxUses and no further, per namespace and grant", async () => {
    const store = new InMemoryGrantUsageStore();
    expect(await store.tryConsume("ns", "g", 2)).toEqual({ consumed: true, used: 1 });
    expect(await store.tryConsume("ns", "g", 2)).toEqual({ consumed: true, used: 2 });
    expect(await store.tryConsume("ns", "g", 2)).toEqual({ consumed: false, used: 2 });
    expect(await store.getUsage("ns", "g")).toBe(2);
    expect(await store.getUsage("ns2", "g")).toBe(0);
    // Namespace and grant ID cannot run together into one key.
    await store.tryConsume("a", "bc", 1);
    expect(await store.getUsage("ab", "c")).toBe(0);
  });

  it.each([0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY])(
    "refuses a bound that is not a positive whole number (%s) and counts nothing",
    async (bad) => {
      const store = new InMemoryGrantUsageStore();
      const error = await store.tryConsume("ns", "g", bad).catch((e: unknown) => e);
      expect(isTesseraError(error, "invalid_input")).toBe(true);
      expect(await store.getUsage("ns", "g")).toBe(0);
    },
  );

  it("is atomic against concurrent callers in this process", async () => {
    const store = new InMemoryGrantUsageStore();
    const results = await Promise.all(
      Array.from({ length: 100 }, () => store.tryConsume("ns", "g", 7)),
    );
    expect(results.filter((r) => r.consumed)).toHaveLength(7);
    expect(await store.getUsage("ns", "g")).toBe(7);
  });
});

describe("InMemoryAuditSink", () => {
  // The sink links each event (its own tests are in audit-sink.test.ts).
  const chainFields = { seq: 1, prev: expect.any(String), hash: expect.any(String) };
  it("keeps events in order and filters by call, trace and limit", async () => {
    const sink = new InMemoryAuditSink();
    const event = (callId: string, traceId: string) => ({
      at: "2026-01-01T00:00:00.000Z",
      source: "kernel" as const,
      outcome: "allowed" as const,
      code: null,
      reason: "allowed" as const,
      traceId,
      callId,
    });
    sink.append(event("c1", "t1"));
    sink.append(event("c2", "t1"));
    sink.append(event("c1", "t2"));
    expect(await sink.read({ callId: "c1" })).toHaveLength(2);
    expect(await sink.read({ traceId: "t1" })).toHaveLength(2);
    expect(await sink.read({ limit: 1 })).toEqual([{ ...event("c1", "t1"), ...chainFields }]);
    expect(await sink.read({ limit: 0 })).toEqual([]);
    // What read returns cannot rewrite what is stored.
    const [first] = await sink.read();
    expect(() => {
      (first as { callId: string }).callId = "tampered";
    }).toThrow();
    sink.clear();
    expect(sink.events).toHaveLength(0);
  });
});

describe("InProcessTransport", () => {
  const envelope = (recipient: string) => ({
    messageId: "m",
    sender: "asker",
    recipient,
    payload: "q",
    traceId: "t",
    callId: "c",
    grantId: "g",
  });

  it("routes to the recipient's handler, else the fallback, else fails no_route", async () => {
    const transport = new InProcessTransport().route("bob", (e) => `bob got ${e.payload}`);
    expect(await transport.deliver(envelope("bob"))).toEqual({
      status: "delivered",
      reply: "bob got q",
    });
    expect(await transport.deliver(envelope("eve"))).toEqual({
      status: "failed",
      code: "no_route",
    });
    expect(transport.delivered.map((e) => e.recipient)).toEqual(["bob"]);
    expect(await InProcessTransport.echo().deliver(envelope("eve"))).toEqual({
      status: "delivered",
      reply: "reply from eve",
    });
  });

  it("awaits a handler's promise, and rejects when the handler throws or rejects", async () => {
    const transport = new InProcessTransport()
      .route("slow", async (e) => `later for ${e.recipient}`)
      .route("quiet", () => undefined)
      .route("thrower", () => {
        throw new Error("boom");
      })
      .route("rejecter", () => Promise.reject(new Error("no")));
    expect(await transport.deliver(envelope("slow"))).toEqual({
      status: "delivered",
      reply: "later for slow",
    });
    expect(await transport.deliver(envelope("quiet"))).toStrictEqual({ status: "delivered" });
    await expect(transport.deliver(envelope("thrower"))).rejects.toThrow("boom");
    await expect(transport.deliver(envelope("rejecter"))).rejects.toThrow("no");
    // Only the envelopes whose handler answered were recorded.
    expect(transport.delivered.map((e) => e.recipient)).toEqual(["slow", "quiet"]);
  });
});

describe("clocks", () => {
  it("ManualClock moves only when told; fixedClock never", () => {
    const clock = new ManualClock("2026-01-01T00:00:00.000Z");
    const start = clock.now();
    clock.advance(5);
    expect(clock.now()).toBe(start + 5);
    clock.set(new Date(0));
    expect(clock.now()).toBe(0);
    expect(fixedClock(42).now()).toBe(42);
  });
});
