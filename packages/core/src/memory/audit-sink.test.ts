import { describe, expect, it } from "vitest";
import { GENESIS_HASH } from "../audit/chain.js";
import type { AuditEvent } from "../contracts/schemas.js";
import { verifyAuditChain } from "../index.js";
import { InMemoryAuditSink } from "./audit-sink.js";

/** The element at `index`, which the test put there. */
function nth<T>(list: readonly T[], index: number): T {
  const value = list[index];
  if (value === undefined) throw new Error(`no element at ${index}`);
  return value;
}

const event = (callId: string, namespaceId?: string): AuditEvent => ({
  at: "2026-01-01T00:00:00.000Z",
  source: namespaceId === undefined ? "gate" : "kernel",
  outcome: "denied",
  code: "no_matching_grant",
  reason: "no_capability",
  traceId: "t",
  callId,
  ...(namespaceId === undefined ? {} : { namespaceId }),
});

describe("InMemoryAuditSink links a hash chain per stream", () => {
  it("gives each namespace, and the gate's stream, its own sequence and a trail that verifies", async () => {
    const sink = new InMemoryAuditSink();
    sink.append(event("a", "n1"));
    sink.append(event("b", "n2"));
    sink.append(event("c"));
    sink.append(event("d", "n1"));
    expect(sink.events.map((e) => [e.namespaceId ?? "", e.seq])).toEqual([
      ["n1", 1],
      ["n2", 1],
      ["", 1],
      ["n1", 2],
    ]);
    expect(nth(sink.events, 0).prev).toBe(GENESIS_HASH);
    expect(nth(sink.events, 3).prev).toBe(nth(sink.events, 0).hash);
    expect(verifyAuditChain(await sink.read())).toMatchObject({ ok: true, events: 4 });
  });

  it("replaces chain fields a writer passed: only the sink links", () => {
    const sink = new InMemoryAuditSink();
    sink.append({ ...event("a", "n1"), seq: 7, prev: "f".repeat(64), hash: "e".repeat(64) });
    expect(sink.events[0]).toMatchObject({ seq: 1, prev: GENESIS_HASH });
    expect(verifyAuditChain(sink.events).ok).toBe(true);
  });

  it("shows each tampering done to its event list", () => {
    const sink = new InMemoryAuditSink();
    for (const id of ["a", "b", "c", "d"]) sink.append(event(id, "n1"));
    const list = [...sink.events];
    const kind = (events: AuditEvent[]) => {
      const result = verifyAuditChain(events);
      return result.ok ? "ok" : `${result.break.kind}@${result.break.index}`;
    };
    expect(kind(list)).toBe("ok");
    expect(kind(list.map((e, i) => (i === 1 ? { ...e, outcome: "allowed" } : e)))).toBe("edited@1");
    expect(kind([nth(list, 0), nth(list, 2), nth(list, 3)])).toBe("deleted@1");
    expect(kind([nth(list, 0), event("x", "n1"), ...list.slice(1)])).toBe("inserted@1");
    expect(kind([nth(list, 0), nth(list, 2), nth(list, 1), nth(list, 3)])).toBe("reordered@1");
  });

  it("links on read what was appended since, in append order, and keeps a writer's later edits out", async () => {
    const sink = new InMemoryAuditSink();
    const held = sink.events;
    const mutable = event("a", "n1");
    sink.append(mutable);
    mutable.callId = "changed after append";
    sink.append(event("b", "n1"));
    expect((await sink.read()).map((e) => [e.callId, e.seq])).toEqual([
      ["a", 1],
      ["b", 2],
    ]);
    sink.append(event("c", "n1"));
    expect(sink.events).toBe(held); // the live list, linked as of this read
    expect(nth(held, 2)).toMatchObject({ callId: "c", seq: 3, prev: nth(held, 1).hash });
    expect(verifyAuditChain(held).ok).toBe(true);
  });

  it("clear() forgets the chains too: the next event starts a stream again", () => {
    const sink = new InMemoryAuditSink();
    sink.append(event("a", "n1"));
    sink.clear();
    sink.append(event("b", "n1"));
    expect(sink.events[0]).toMatchObject({ seq: 1, prev: GENESIS_HASH });
  });
});
