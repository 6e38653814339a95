import { describe, expect, it } from "vitest";
import { linkedTrail as chain, auditEventOf as raw } from "../../test/fixtures.js";
import type { AuditEvent } from "../contracts/schemas.js";
import { auditEventHash, GENESIS_HASH, linkAuditEvent } from "./chain.js";
import { type AuditVerification, verifyAuditChain } from "./verify.js";

/** The element at `index`, which the test put there. */
function nth<T>(list: readonly T[], index: number): T {
  const value = list[index];
  if (value === undefined) throw new Error(`no element at ${index}`);
  return value;
}

/** The same event with its own hash recomputed, as a careful forger leaves it. */
const rehash = (event: AuditEvent): AuditEvent => ({ ...event, hash: auditEventHash(event) });

const calls = (n: number, ns = "ns") => Array.from({ length: n }, (_, i) => raw(`c${i}`, ns));

function broken(result: AuditVerification) {
  if (result.ok) throw new Error("expected a break");
  return result.break;
}

describe("verifyAuditChain", () => {
  it("an intact trail of interleaved streams verifies, with each stream's head and count", () => {
    const events = chain([raw("a", "n1"), raw("b", "n2"), raw("c"), raw("d", "n1"), raw("e")]);
    const result = verifyAuditChain(events);
    expect(result.ok).toBe(true);
    expect(result.events).toBe(5);
    expect(result.streams.map((s) => [s.stream, s.events, s.unchained, s.head.seq])).toEqual([
      ["n1", 2, 0, 2],
      ["n2", 1, 0, 1],
      ["", 2, 0, 2],
    ]);
    expect(nth(result.streams, 0).head.hash).toBe(nth(events, 3).hash);
    expect(nth(events, 0).prev).toBe(GENESIS_HASH);
  });

  it("an empty trail verifies", () => {
    expect(verifyAuditChain([])).toEqual({ ok: true, events: 0, streams: [] });
  });

  it("events without chain fields at a stream's start are an unchained prefix, not a break", () => {
    const legacy = [raw("old0"), raw("old1")];
    const result = verifyAuditChain([...legacy, ...chain([raw("new0"), raw("new1")])]);
    expect(result.ok).toBe(true);
    expect(result.streams[0]).toMatchObject({ events: 4, unchained: 2, head: { seq: 2 } });
  });

  it("an unchained event after the chain began is inserted; so is one with some chain fields", () => {
    const events = chain(calls(3));
    const late = verifyAuditChain([...events.slice(0, 2), raw("forged", "ns"), nth(events, 2)]);
    expect(broken(late)).toMatchObject({ kind: "inserted", index: 2, expectedSeq: 3 });
    const { hash: _hash, ...partial } = nth(events, 1);
    const result = verifyAuditChain([nth(events, 0), partial, nth(events, 2)]);
    expect(broken(result)).toMatchObject({ kind: "inserted", index: 1, seq: 2 });
    expect(broken(result).detail).toContain("some of its chain fields");
  });

  it("an edit that leaves the hash is edited at that event", () => {
    const events = chain(calls(4));
    events[2] = { ...nth(events, 2), outcome: "denied" };
    const result = verifyAuditChain(events);
    expect(broken(result)).toMatchObject({
      kind: "edited",
      stream: "ns",
      index: 2,
      seq: 3,
      expectedSeq: 3,
    });
    expect(nth(result.streams, 0).head.seq).toBe(2);
  });

  it("an edit that recomputes its own hash is found by the next link and reported at the edited event", () => {
    const events = chain(calls(4));
    events[1] = rehash({ ...nth(events, 1), reason: "no_capability" });
    const result = verifyAuditChain(events);
    expect(broken(result)).toMatchObject({ kind: "edited", index: 1, seq: 2, expectedSeq: 2 });
    expect(broken(result).detail).toContain("seq 3");
    expect(nth(result.streams, 0).head).toEqual({ seq: 1, hash: nth(events, 0).hash });
  });

  it("an event replaced by a forgery that fits neither side is edited at the forgery", () => {
    const events = chain(calls(4));
    const forged = nth(chain([raw("f0", "ns"), raw("f1", "ns")]), 1); // seq 2, a foreign prev
    events[1] = forged;
    expect(broken(verifyAuditChain(events))).toMatchObject({ kind: "edited", index: 1, seq: 2 });
  });

  it("a deletion is a gap reported at the event after it; reordering fills the gap later", () => {
    const events = chain(calls(5));
    const deleted = verifyAuditChain([
      nth(events, 0),
      nth(events, 1),
      nth(events, 3),
      nth(events, 4),
    ]);
    expect(broken(deleted)).toMatchObject({ kind: "deleted", index: 2, seq: 4, expectedSeq: 3 });
    const first = verifyAuditChain(events.slice(2));
    expect(broken(first)).toMatchObject({ kind: "deleted", index: 0, seq: 3, expectedSeq: 1 });
    expect(broken(first).detail).toContain("from seq 1 to 2");
    const swapped = [
      nth(events, 0),
      nth(events, 2),
      nth(events, 1),
      nth(events, 3),
      nth(events, 4),
    ];
    expect(broken(verifyAuditChain(swapped))).toMatchObject({
      kind: "reordered",
      index: 1,
      seq: 3,
      expectedSeq: 2,
    });
  });

  it("a copy of an event is inserted at the copy; a forged link is inserted at the forgery", () => {
    const events = chain(calls(4));
    const copied = verifyAuditChain([...events.slice(0, 3), nth(events, 1), nth(events, 3)]);
    expect(broken(copied)).toMatchObject({ kind: "inserted", index: 3, seq: 2, expectedSeq: 4 });
    // Linked after seq 2 with its hash right: it takes seq 3, and the real seq 3 follows.
    const forged = linkAuditEvent(raw("forged", "ns"), {
      seq: 2,
      hash: String(nth(events, 1).hash),
    });
    const result = verifyAuditChain([...events.slice(0, 2), forged, ...events.slice(2)]);
    expect(broken(result)).toMatchObject({ kind: "inserted", index: 2, seq: 3 });
    expect(nth(result.streams, 0).head.seq).toBe(2);
  });

  it("reports the break with the lowest index over every stream, and each stream's own", () => {
    const events = chain([raw("a", "n1"), raw("b", "n2"), raw("c", "n1"), raw("d", "n2")]);
    events[3] = { ...nth(events, 3), detail: "changed" };
    events[2] = { ...nth(events, 2), detail: "changed" };
    const result = verifyAuditChain(events);
    expect(broken(result)).toMatchObject({ stream: "n1", index: 2 });
    expect(result.streams.map((s) => s.break?.index)).toEqual([2, 3]);
    const intact = verifyAuditChain(chain([raw("x", "n1"), raw("y", "n2")]));
    expect(intact.streams.every((s) => s.break === undefined)).toBe(true);
  });

  it("classifies each tampering at every position of a stream", () => {
    const n = 6;
    const events = chain(calls(n));
    for (let k = 0; k < n; k++) {
      const edited = events.map((e, i) => (i === k ? { ...e, callId: "x" } : e));
      expect(broken(verifyAuditChain(edited)), `edit ${k}`).toMatchObject({
        kind: "edited",
        index: k,
      });
      const insertedRaw = [...events.slice(0, k), raw("x", "ns"), ...events.slice(k)];
      const inserted = verifyAuditChain(insertedRaw);
      if (k === 0) {
        // Before the first event, an unchained event reads as the unchained prefix.
        expect(inserted.ok).toBe(true);
      } else {
        expect(broken(inserted), `insert ${k}`).toMatchObject({ kind: "inserted", index: k });
      }
      if (k < n - 1) {
        const rewritten = events.map((e, i) => (i === k ? rehash({ ...e, callId: "x" }) : e));
        expect(broken(verifyAuditChain(rewritten)), `rewrite ${k}`).toMatchObject({
          kind: "edited",
          index: k,
        });
        const deleted = events.filter((_, i) => i !== k);
        expect(broken(verifyAuditChain(deleted)), `delete ${k}`).toMatchObject({
          kind: "deleted",
          index: k,
          expectedSeq: k + 1,
        });
        const swapped = [...events];
        [swapped[k], swapped[k + 1]] = [nth(swapped, k + 1), nth(swapped, k)];
        expect(broken(verifyAuditChain(swapped)), `swap ${k}`).toMatchObject({
          kind: "reordered",
          index: k,
        });
      }
    }
  });

  it("judges a forged seq far ahead as a deletion without walking the gap", () => {
    const events = chain(calls(3));
    const far = rehash({ ...nth(events, 1), seq: Number.MAX_SAFE_INTEGER });
    const result = verifyAuditChain([nth(events, 0), far, nth(events, 2)]);
    expect(broken(result)).toMatchObject({ kind: "deleted", index: 1, expectedSeq: 2 });
  });

  it("cannot see, alone, a rewritten last event, a dropped tail or a wholly rehashed stream", () => {
    const events = chain(calls(4));
    const last = [...events.slice(0, 3), rehash({ ...nth(events, 3), callId: "x" })];
    expect(verifyAuditChain(last).ok).toBe(true);
    expect(verifyAuditChain(events.slice(0, 2)).ok).toBe(true);
    const forged = chain(calls(4).map((e) => ({ ...e, outcome: "denied" as const })));
    expect(verifyAuditChain(forged).ok).toBe(true);
  });
});
